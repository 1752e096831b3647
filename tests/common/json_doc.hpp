// The --json outputs and their schema documents (docs/<command>-json.md): every object key
// an output holds, at any depth, must be named in its document as `key` (in backticks), so
// that a field added to the code without a line in the document fails the test that runs
// the command.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace warden::testing {

// The keys of every object anywhere in `output` (in arrays, objects of objects, ...) that
// none of the documents at `doc_paths` mentions as `key`, sorted, each once. Examples in
// fenced code blocks do not count. Any `word` counts, so a key that is also a documented
// value (`survivors`, an outcome of reap) passes on that alone. A document that cannot be
// read gives one entry saying so.
std::vector<std::string> undocumented_keys(const nlohmann::json& output,
                                           const std::vector<std::string>& doc_paths);

// kSourceDir + "/docs/" + name: a schema document of this source tree.
std::string schema_doc(const std::string& name);

}  // namespace warden::testing
