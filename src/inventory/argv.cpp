#include "inventory/argv.hpp"

#include <algorithm>
#include <cctype>

namespace warden::inventory {

std::string lower(std::string_view s) {
    std::string o(s);
    for (char& c : o)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return o;
}

std::string_view basename(std::string_view p) {
    size_t s = p.rfind('/');
    return s == std::string_view::npos ? p : p.substr(s + 1);
}

bool starts_with(std::string_view s, std::string_view p) {
    return s.substr(0, p.size()) == p;
}
bool ends_with(std::string_view s, std::string_view p) {
    return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// "@scope/pkg@1.2.3" -> "pkg"; "mcp-server-git==0.6" -> "mcp-server-git".
std::string package_name(std::string_view a) {
    std::string_view b = basename(a);
    size_t at = b.find('@', 1);
    if (at != std::string_view::npos) b = b.substr(0, at);
    size_t eq = b.find("==");
    if (eq != std::string_view::npos) b = b.substr(0, eq);
    for (std::string_view ext : {".js", ".mjs", ".cjs", ".py", ".ts"})
        if (ends_with(b, ext)) b.remove_suffix(ext.size());
    return lower(b);
}

// An argument that names an MCP server by the conventions of the ecosystem.
bool mcp_name(std::string_view arg) {
    if (arg.find("@modelcontextprotocol/") != std::string_view::npos) return true;
    std::string n = package_name(arg);
    if (n.empty()) return false;
    return starts_with(n, "mcp-server-") || starts_with(n, "mcp_server_") ||
           starts_with(n, "server-mcp") || ends_with(n, "-mcp") || ends_with(n, "_mcp") ||
           ends_with(n, "-mcp-server") || ends_with(n, "_mcp_server") || n == "mcp-server";
}

// Runner that fetches and starts a package: npx, uvx, bunx, pipx run, npm exec, uv tool run,
// pnpm dlx, yarn dlx, bun x. Returns the runner's display name or "".
std::string runner(const std::vector<std::string>& argv) {
    if (argv.empty()) return {};
    std::string_view a0 = basename(argv[0]);
    std::string_view a1 = argv.size() > 1 ? std::string_view(argv[1]) : std::string_view();
    std::string_view a2 = argv.size() > 2 ? std::string_view(argv[2]) : std::string_view();
    if (a0 == "npx" || a0 == "uvx" || a0 == "bunx" || a0 == "pnpx") return std::string(a0);
    if ((a0 == "node" || a0 == "nodejs") && (ends_with(a1, "npx-cli.js") || ends_with(a1, "/npx")))
        return "npx";
    if ((a0 == "node" || a0 == "nodejs") && ends_with(a1, "npm-cli.js") && a2 == "exec")
        return "npm exec";
    if (a0 == "npm" && a1 == "exec") return "npm exec";
    if (a0 == "pipx" && a1 == "run") return "pipx run";
    if (a0 == "uv" && (a1 == "run" || (a1 == "tool" && a2 == "run"))) return "uv run";
    if ((a0 == "pnpm" || a0 == "yarn") && a1 == "dlx") return std::string(a0) + " dlx";
    if (a0 == "bun" && (a1 == "x" || a1 == "run")) return "bun " + std::string(a1);
    return {};
}

bool is_shell(std::string_view a0) {
    return a0 == "sh" || a0 == "bash" || a0 == "dash" || a0 == "zsh" || a0 == "ash" || a0 == "ksh";
}

// A process that launches another and otherwise does nothing of its own: `sh -c …`, `env …`,
// a package runner.
bool is_wrapper(const std::vector<std::string>& argv) {
    if (argv.empty()) return false;
    std::string_view a0 = basename(argv[0]);
    if (is_shell(a0)) return std::find(argv.begin(), argv.end(), "-c") != argv.end();
    if (a0 == "env" || a0 == "nohup" || a0 == "setsid" || a0 == "timeout" || a0 == "nice")
        return true;
    return !runner(argv).empty();
}

bool is_supervisor(const Process& p) {
    auto argv = p.argv();
    if (argv.size() < 2 || argv[1] != "run") return false;
    return basename(argv[0]) == "mcpwarden" || basename(p.exe) == "mcpwarden";
}

std::string join_argv(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& a : v) {
        if (!s.empty()) s.push_back(' ');
        s += escape_bytes(a);
    }
    return s;
}

std::string join_words(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& a : v)
        s += (s.empty() ? "" : " ") + a;
    return s;
}

namespace {

// Shell words of a `sh -c` script, as far as a launcher's one-liner needs: blanks split,
// single and double quotes group, the first `;`, `&&`, `||`, `|` or `&` ends the command.
// "$0", "$1"… and "$@" take the arguments that follow the script.
std::vector<std::string> script_words(std::string_view script,
                                      const std::vector<std::string>& positional) {
    std::vector<std::string> words;
    std::string cur;
    bool have = false;
    char quote = 0;
    auto flush = [&] {
        if (!have) return;
        if (cur == "$@") {
            for (size_t i = 1; i < positional.size(); ++i)
                words.push_back(positional[i]);
        } else if (cur.size() == 2 && cur[0] == '$' && cur[1] >= '0' && cur[1] <= '9') {
            size_t i = static_cast<size_t>(cur[1] - '0');
            if (i < positional.size()) words.push_back(positional[i]);
        } else {
            words.push_back(cur);
        }
        cur.clear();
        have = false;
    };
    for (char c : script) {
        if (quote) {
            if (c == quote)
                quote = 0;
            else
                cur.push_back(c);
        } else if (c == '\'' || c == '"') {
            quote = c;
            have = true;
        } else if (c == ' ' || c == '\t' || c == '\n') {
            flush();
        } else if (c == ';' || c == '&' || c == '|') {
            break;
        } else {
            cur.push_back(c);
            have = true;
        }
    }
    flush();
    if (!words.empty() && words.front() == "exec") words.erase(words.begin());
    return words;
}

bool interpreter(std::string_view a0) {
    for (std::string_view i : {"python", "node", "nodejs", "bun", "deno", "ruby", "perl", "php"})
        if (a0 == i || (starts_with(a0, i) && a0.size() > i.size() &&
                        (std::isdigit(static_cast<unsigned char>(a0[i.size()])) != 0)))
            return true;
    return false;
}

}  // namespace

// The command a launch ends up running, as words to compare with a declared one: wrappers
// peeled (`sh -c '…'`, `bash -lc '…'`, `env A=B …`), package runners reduced to the
// package (`npx -y @scope/server@1.2`, `npm exec …` — what npm renames the npx process to —,
// `uvx`, `uv tool run`, `pipx run`, `bunx`, `pnpm dlx` all give "pkg:server"), an
// interpreter reduced to its script's or module's name (`python3 /srv/server.py` and
// `python3 server.py` both give "server.py"), a program to its basename. The same function
// reads the process's argv and the config's command + args, so both sides meet.
std::vector<std::string> normalized_command(std::vector<std::string> argv) {
    for (int round = 0; round < 8 && !argv.empty(); ++round) {
        // npm's process title ("npm exec ./pkg", the rest of argv NUL padding) is one string.
        if (argv.front().find(' ') != std::string::npos &&
            std::all_of(argv.begin() + 1, argv.end(), [](const auto& a) { return a.empty(); }))
            argv = script_words(argv.front(), {});
        while (argv.size() > 1 && argv.back().empty())
            argv.pop_back();
        if (argv.empty()) break;
        std::string_view a0 = basename(argv[0]);
        if (is_shell(a0)) {
            // -c, or a flag group with c in it (-lc, -ec): the script is the next argument.
            size_t c = 1;
            while (c < argv.size() && starts_with(argv[c], "-") && !starts_with(argv[c], "--") &&
                   argv[c].find('c') == std::string::npos)
                ++c;
            if (c + 1 >= argv.size() || !starts_with(argv[c], "-")) break;
            std::vector<std::string> positional(argv.begin() + static_cast<long>(c) + 2,
                                                argv.end());
            argv = script_words(argv[c + 1], positional);
            continue;
        }
        if (a0 == "env" || a0 == "nohup" || a0 == "setsid") {
            size_t i = 1;
            while (i < argv.size() &&
                   (argv[i].find('=') != std::string::npos || starts_with(argv[i], "-")))
                ++i;
            argv.erase(argv.begin(), argv.begin() + static_cast<long>(i));
            continue;
        }
        if (std::string r = runner(argv); !r.empty()) {
            // Past the runner's own words and flags to the package.
            size_t i = 1;
            if (r == "npm exec" || r == "pipx run" || r == "uv run" || r == "pnpm dlx" ||
                r == "yarn dlx" || r == "bun x" || r == "bun run")
                i = 2;
            if ((a0 == "node" || a0 == "nodejs")) i = r == "npm exec" ? 3 : 2;
            if (r == "uv run" && argv.size() > 2 && argv[1] == "tool") i = 3;
            while (i < argv.size() && starts_with(argv[i], "-") && argv[i] != "--")
                ++i;
            if (i < argv.size() && argv[i] == "--") ++i;
            if (i >= argv.size()) break;
            std::vector<std::string> out{"pkg:" + package_name(argv[i])};
            out.insert(out.end(), argv.begin() + static_cast<long>(i) + 1, argv.end());
            return out;
        }
        if (interpreter(a0)) {
            size_t i = 1;
            while (i < argv.size() && starts_with(argv[i], "-") && argv[i] != "-m")
                ++i;
            if (i < argv.size() && argv[i] == "-m") ++i;
            if (i >= argv.size()) break;
            std::vector<std::string> out{std::string(basename(argv[i]))};
            out.insert(out.end(), argv.begin() + static_cast<long>(i) + 1, argv.end());
            return out;
        }
        argv[0] = std::string(a0);
        return argv;
    }
    if (!argv.empty()) argv[0] = std::string(basename(argv[0]));
    return argv;
}

std::vector<std::string> normalized_declared(const std::string& command,
                                             const std::vector<std::string>& args) {
    if (command.empty()) return {};
    std::vector<std::string> argv{command};
    argv.insert(argv.end(), args.begin(), args.end());
    return normalized_command(std::move(argv));
}

}  // namespace warden::inventory
