// Batch tokenizer oracle: llama.cpp v0.4.0 (through node-llama-cpp, loaded as
// ../shared/oracle/greedy.mjs loads it) tokenizes many texts with many vocabularies in one
// process: starting node-llama-cpp takes seconds, loading a vocabulary a fraction of one.
//
// usage: node oracle_tokenize.mjs JOBS.json OUT.json
//   JOBS: [{"model": "m.gguf", "texts": ["..."], "detokenize": [[1, 2], ...],
//           "check_ids": [ids] or "n_tokens": N}, ...]
//   OUT:  one object per job:
//         {"plain": [[ids]], "special": [[ids]],   llama_tokenize(add_special=false,
//                                                   parse_special=false / true)
//          "detokenized": ["..."], "detokenized_special": ["..."],   llama_detokenize(
//                                                   remove_special=false, unparse_special=false / true)
//          "eog": [ids], "control": [ids],         among check_ids (or 0..n_tokens-1)
//          "bos": id, "eos": id, "add_bos": bool, "add_eos": bool}
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {createRequire} from "node:module";
import {pathToFileURL} from "node:url";

const oracleDir = process.env.TANDEM_ORACLE_DIR || path.join(os.homedir(), ".cache", "tandem-oracle");
const req = createRequire(path.join(oracleDir, "package.json"));
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(req.resolve("node-llama-cpp")).href);

const [jobsPath, outPath] = process.argv.slice(2);
if (!outPath) {
    console.error("usage: node oracle_tokenize.mjs JOBS.json OUT.json");
    process.exit(2);
}
const jobs = JSON.parse(fs.readFileSync(jobsPath, "utf8"));
const llama = await getLlama({gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
                              maxThreads: 1, logLevel: LlamaLogLevel.error});
const results = [];
for (const job of jobs) {
    const model = await llama.loadModel({modelPath: job.model, gpuLayers: 0, useMmap: true, vocabOnly: true});
    const m = model._model;  // the addon: tokenize/detokenize call llama_tokenize/llama_detokenize directly
    const texts = job.texts || [];
    const detok = job.detokenize || [];
    const r = {
        plain: texts.map(t => t === "" ? [] : Array.from(m.tokenize(t, false))),
        special: texts.map(t => t === "" ? [] : Array.from(m.tokenize(t, true))),
        detokenized: detok.map(ids => ids.length === 0 ? "" : m.detokenize(Uint32Array.from(ids), false)),
        detokenized_special: detok.map(ids => ids.length === 0 ? "" : m.detokenize(Uint32Array.from(ids), true)),
        eog: [], control: [],
        bos: m.tokenBos(), eos: m.tokenEos(),
        add_bos: m.shouldPrependBosToken(), add_eos: m.shouldAppendEosToken(),
    };
    // The addon cannot say how many tokens there are and an id past the end aborts: the job
    // gives the ids to look at (two addon calls per id take seconds over a whole vocabulary).
    const ids = job.check_ids || Array.from({length: job.n_tokens || 0}, (_, i) => i);
    for (const id of ids) {
        if (m.isEogToken(id)) r.eog.push(id);
        if (m.getTokenAttributes(id) & 8) r.control.push(id);  // LLAMA_TOKEN_ATTR_CONTROL
    }
    results.push(r);
    await model.dispose();
}
fs.writeFileSync(outPath, JSON.stringify(results));
await llama.dispose();
process.exit(0);
