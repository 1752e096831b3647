#include "sandbox/command_line.hpp"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <string_view>

#include "sandbox/fs_probe.hpp"

namespace warden::sandbox {

namespace {

constexpr int kMaxDepth = 4;  // sh -c 'env X=1 bash -c "…"' nests; further is left unread

bool is_shell(const std::string& cmd) {
    static const char* const shells[] = {"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh"};
    return std::any_of(std::begin(shells), std::end(shells),
                       [&](const char* s) { return cmd == s; });
}

bool is_assignment(const std::string& w) {
    auto eq = w.find('=');
    if (eq == std::string::npos || eq == 0) return false;
    return std::all_of(w.begin(), w.begin() + static_cast<long>(eq), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
}

// A shell's -c string, or "" with `found` false: the word after options among which one
// holds `c` (`-c`, `-lc`, `-ec`); `-o OPTION` takes a value.
std::string shell_string(const std::vector<std::string>& argv, bool& found) {
    found = false;
    bool want = false;
    for (size_t i = 1; i < argv.size(); ++i) {
        const std::string& a = argv[i];
        if (want && (a.empty() || a[0] != '-')) {
            found = true;
            return a;
        }
        if (a == "-o" || a == "+o") {
            ++i;
            continue;
        }
        if (a.size() > 1 && (a[0] == '-' || a[0] == '+') && a.rfind("--", 0) != 0) {
            want = want || a.find('c') != std::string::npos;
            continue;
        }
        if (a.rfind("--", 0) == 0) continue;  // --login, --norc …
        return "";                            // a script file: an argument like any other
    }
    return "";
}

// `env [OPTIONS] [NAME=VALUE]... CMD ARGS`: CMD ARGS and the directory it runs in.
Invocation after_env(const std::vector<std::string>& argv, const std::string& cwd) {
    Invocation out{{}, cwd};
    size_t i = 1;
    for (; i < argv.size(); ++i) {
        const std::string& a = argv[i];
        if (a == "--") {
            ++i;
            break;
        }
        if (a == "-u" || a == "--unset") {
            ++i;
            continue;
        }
        if (a == "-C" || a == "--chdir") {
            if (i + 1 < argv.size()) out.cwd = fs_probe::absolute(argv[++i], out.cwd);
            continue;
        }
        if (a == "-S" || a == "--split-string") {
            if (i + 1 < argv.size())
                for (auto& cmd : shell_commands(argv[++i]))
                    out.argv.insert(out.argv.end(), cmd.begin(), cmd.end());
            continue;
        }
        if (!a.empty() && a[0] == '-') continue;  // -i, -0, --ignore-environment …
        if (is_assignment(a)) continue;
        break;
    }
    out.argv.insert(out.argv.end(), argv.begin() + static_cast<long>(std::min(i, argv.size())),
                    argv.end());
    return out;
}

void collect(const Invocation& inv, int depth, std::vector<Invocation>& out) {
    if (inv.argv.empty()) return;
    out.push_back(inv);
    if (depth >= kMaxDepth) return;
    const std::string cmd = fs_probe::base_of(inv.argv[0]);
    if (cmd == "env") {
        collect(after_env(inv.argv, inv.cwd), depth + 1, out);
        return;
    }
    if (!is_shell(cmd)) return;
    bool found = false;
    const std::string script = shell_string(inv.argv, found);
    if (!found) return;
    std::string cwd = inv.cwd;
    for (auto& words : shell_commands(script)) {
        if (words.empty()) continue;
        if (words[0] == "cd") {
            // Only a literal directory is followed; `cd "$X"` leaves the rest unplaced.
            if (words.size() > 1 && !words[1].empty()) cwd = fs_probe::absolute(words[1], cwd);
            continue;
        }
        collect({std::move(words), cwd}, depth + 1, out);
    }
}

// The shell's tokenizer, as far as the sandbox needs it: words, quotes, backslashes,
// comments and the operators that separate simple commands.
class ShellReader {
  public:
    explicit ShellReader(std::string_view s) : s_(s) {}

    std::vector<std::vector<std::string>> commands() {
        while (i_ < s_.size()) {
            char c = s_[i_];
            if (c == ' ' || c == '\t') {
                end_word();
                ++i_;
            } else if (c == ';' || c == '&' || c == '|' || c == '\n' || c == '(' || c == ')') {
                end_word();
                end_command();
                ++i_;
            } else if (c == '#' && !in_word_) {
                while (i_ < s_.size() && s_[i_] != '\n')
                    ++i_;
            } else if (c == '\'') {
                in_word_ = true;
                auto close = s_.find('\'', i_ + 1);
                word_ +=
                    s_.substr(i_ + 1, close == std::string_view::npos ? close : close - i_ - 1);
                i_ = close == std::string_view::npos ? s_.size() : close + 1;
            } else if (c == '"') {
                in_word_ = true;
                double_quoted();
            } else if (c == '\\' && i_ + 1 < s_.size()) {
                in_word_ = true;
                if (s_[i_ + 1] != '\n') word_ += s_[i_ + 1];
                i_ += 2;
            } else {
                in_word_ = true;
                expands_ = expands_ || c == '$' || c == '`';
                word_ += c;
                ++i_;
            }
        }
        end_word();
        end_command();
        return std::move(out_);
    }

  private:
    void double_quoted() {
        for (++i_; i_ < s_.size() && s_[i_] != '"'; ++i_) {
            if (s_[i_] == '\\' && i_ + 1 < s_.size() &&
                std::string_view("$`\"\\\n").find(s_[i_ + 1]) != std::string_view::npos) {
                if (s_[i_ + 1] != '\n') word_ += s_[i_ + 1];
                ++i_;
                continue;
            }
            expands_ = expands_ || s_[i_] == '$' || s_[i_] == '`';
            word_ += s_[i_];
        }
        ++i_;
    }
    void end_word() {
        if (!in_word_) return;
        // A word the shell expands at run time is unknown here: kept as a place, not a path.
        command_.push_back(expands_ ? std::string() : std::move(word_));
        word_.clear();
        in_word_ = expands_ = false;
    }
    void end_command() {
        // Leading assignments and the words that only run the rest (`exec node x.js`).
        size_t skip = 0;
        while (skip < command_.size() &&
               (is_assignment(command_[skip]) || command_[skip] == "exec" ||
                command_[skip] == "command" || command_[skip] == "nohup"))
            ++skip;
        if (skip < command_.size())
            out_.emplace_back(command_.begin() + static_cast<long>(skip), command_.end());
        command_.clear();
    }

    std::string_view s_;
    size_t i_ = 0;
    std::string word_;
    bool in_word_ = false, expands_ = false;
    std::vector<std::string> command_;
    std::vector<std::vector<std::string>> out_;
};

}  // namespace

std::vector<std::vector<std::string>> shell_commands(const std::string& script) {
    return ShellReader(script).commands();
}

std::vector<Invocation> invocations_of(const std::vector<std::string>& argv,
                                       const std::string& cwd) {
    std::vector<Invocation> out;
    collect({argv, cwd}, 0, out);
    return out;
}

ModuleFound python_module_path(const std::string& module, const std::vector<std::string>& search) {
    const std::string top = module.substr(0, module.find('.'));
    if (top.empty()) return {};
    for (const auto& dir : search) {
        if (fs_probe::is_dir(dir + "/" + top)) return {dir, dir + "/" + top};
        if (fs_probe::is_file(dir + "/" + top + ".py")) return {dir, dir + "/" + top + ".py"};
    }
    return {};
}

std::vector<std::string> python_search_path(const std::string& cwd, const std::string& pythonpath,
                                            const std::string& home) {
    std::vector<std::string> out{cwd};
    for (size_t at = 0; at <= pythonpath.size() && !pythonpath.empty();) {
        size_t colon = pythonpath.find(':', at);
        std::string entry = pythonpath.substr(at, colon == std::string::npos ? colon : colon - at);
        if (!entry.empty()) out.push_back(fs_probe::absolute(entry, cwd));
        if (colon == std::string::npos) break;
        at = colon + 1;
    }
    if (home.empty()) return out;
    const std::string lib = home + "/.local/lib";
    if (DIR* d = ::opendir(lib.c_str())) {
        while (dirent* e = ::readdir(d))
            if (std::string_view(e->d_name).substr(0, 7) == "python3")
                out.push_back(lib + "/" + e->d_name + "/site-packages");
        ::closedir(d);
    }
    return out;
}

}  // namespace warden::sandbox
