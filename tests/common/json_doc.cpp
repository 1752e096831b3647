#include "common/json_doc.hpp"

#include <fstream>
#include <set>
#include <string_view>

#include "common/paths.hpp"

namespace warden::testing {
namespace {

// Each `span` of the document's prose and tables; fenced code blocks (the examples) do not
// count, so that an example alone does not document a field.
std::set<std::string> backticked_words(std::istream& in) {
    std::set<std::string> words;
    bool fenced = false;
    std::string line;
    while (std::getline(in, line)) {
        if (std::string_view(line).substr(0, 3) == "```") {
            fenced = !fenced;
            continue;
        }
        if (fenced) continue;
        for (size_t open = line.find('`'); open != std::string::npos;) {
            size_t close = line.find('`', open + 1);
            if (close == std::string::npos) break;
            words.insert(line.substr(open + 1, close - open - 1));
            open = line.find('`', close + 1);
        }
    }
    return words;
}

void collect_keys(const nlohmann::json& j, std::set<std::string>& keys) {
    if (j.is_object()) {
        for (const auto& [key, value] : j.items()) {
            keys.insert(key);
            collect_keys(value, keys);
        }
    } else if (j.is_array()) {
        for (const auto& value : j)
            collect_keys(value, keys);
    }
}

}  // namespace

std::vector<std::string> undocumented_keys(const nlohmann::json& output,
                                           const std::vector<std::string>& doc_paths) {
    std::set<std::string> documented;
    for (const std::string& path : doc_paths) {
        std::ifstream in(path);
        if (!in) return {"(cannot read the schema document " + path + ")"};
        documented.merge(backticked_words(in));
    }
    std::set<std::string> keys;
    collect_keys(output, keys);
    std::vector<std::string> missing;
    for (const std::string& k : keys)
        if (!documented.count(k)) missing.push_back(k);
    return missing;
}

std::string schema_doc(const std::string& name) {
    return std::string(kSourceDir) + "/docs/" + name;
}

}  // namespace warden::testing
