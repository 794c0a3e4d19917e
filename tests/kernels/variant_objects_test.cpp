// The variant object files (listed by src/kernels/CMakeLists.txt) hold no static initialisers,
// so starting the program runs no instruction of an unchosen variant; and the SIMD variants
// define no weak (inline) code outside their own namespace, which the linker could otherwise
// pick for callers built with baseline flags.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/oracle.h"

#if !defined(TANDEM_NM) || !defined(TANDEM_READELF)
#define TANDEM_NM ""
#define TANDEM_READELF ""
#endif

namespace tandem {
namespace {

struct VariantObjects {
    std::string variant;
    std::vector<std::string> objects;
};

std::vector<VariantObjects> read_object_lists() {
    std::vector<VariantObjects> out;
    std::ifstream in(std::string(TANDEM_BINARY_DIR) + "/kernel_variant_objects.tsv");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        VariantObjects v;
        std::string field;
        std::getline(fields, v.variant, '\t');
        while (std::getline(fields, field, '\t')) {
            if (!field.empty()) v.objects.push_back(field);
        }
        if (!v.variant.empty()) out.push_back(v);
    }
    return out;
}

TEST(VariantObjects, NoStaticInitialisersNorForeignInlineCode) {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "AddressSanitizer adds a module constructor to every object; checked in the "
                    "release build";
#endif
    const auto lists = read_object_lists();
    ASSERT_FALSE(lists.empty()) << "no " << TANDEM_BINARY_DIR << "/kernel_variant_objects.tsv";
    // The target's binutils as CMake found them (cross ones in a cross build), else the PATH's.
    std::string readelf = TANDEM_READELF, nm = TANDEM_NM;
    if (readelf.empty()) readelf = "readelf";
    if (nm.empty()) nm = "nm";
    std::string out;
    if (testing::run_command(testing::shell_quote(readelf) + " --version", &out) != 0 ||
        testing::run_command(testing::shell_quote(nm) + " --version", &out) != 0) {
        GTEST_SKIP() << readelf << " / " << nm << " (binutils for this target) not installed";
    }
    for (const VariantObjects& v : lists) {
        ASSERT_FALSE(v.objects.empty()) << v.variant;
        for (const std::string& obj : v.objects) {
            ASSERT_EQ(
                0, testing::run_command(
                       testing::shell_quote(readelf) + " -SW " + testing::shell_quote(obj), &out))
                << out;
            for (const char* section : {".init_array", ".ctors", ".preinit_array"}) {
                EXPECT_EQ(out.find(section), std::string::npos)
                    << obj << " has a " << section << " section";
            }
            if (v.variant == "baseline") continue;  // built with baseline flags anyway
            ASSERT_EQ(0, testing::run_command(
                             testing::shell_quote(nm) + " -C " + testing::shell_quote(obj), &out))
                << out;
            std::istringstream lines(out);
            std::string line;
            const std::string own = "tandem::kernels_" + v.variant + "::";
            while (std::getline(lines, line)) {
                // "ADDRESS TYPE NAME": weak / unique definitions are code or data the linker
                // may merge with another object's copy.
                if (line.size() < 20) continue;
                const char type = line[17];
                if (type != 'W' && type != 'V' && type != 'u') continue;
                EXPECT_NE(line.find(own), std::string::npos)
                    << obj << " defines shared symbol: " << line;
            }
        }
    }
}

}  // namespace
}  // namespace tandem
