#include "sandbox/launcher.hpp"

#include <dirent.h>

#include <algorithm>
#include <string_view>

#include "sandbox/fs_probe.hpp"
#include "sys/fd.hpp"

namespace warden::sandbox {

std::string package_name(const std::string& spec) {
    // npm: "name@range", "@scope/name@range"; Python: "name==1.0", "name>=1", "name[extra]".
    size_t from = spec.size() > 1 && spec[0] == '@' ? 1 : 0;
    size_t end = spec.find_first_of("@=<>~![ ;", from);
    return spec.substr(0, end);
}

namespace {

// How one launcher reads its command line: the options that take a value (the package
// options among them), and the words that introduce it (`npm exec`).
struct Grammar {
    std::vector<std::string_view> valued;        // options followed by a value
    std::vector<std::string_view> package_opts;  // among them, those naming packages
};

bool among(std::string_view w, const std::vector<std::string_view>& list) {
    return std::find(list.begin(), list.end(), w) != list.end();
}

// The packages of a launcher's arguments (those after its name and subcommand): the values
// of its package options, else its first positional word, the package it runs. Options end
// at that word: what follows is the server's own command line.
std::vector<std::string> packages_in(const std::vector<std::string>& args, size_t from,
                                     const Grammar& g) {
    std::vector<std::string> named;
    std::string first;
    for (size_t i = from; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--") {
            if (i + 1 < args.size()) first = args[i + 1];
            break;
        }
        if (a.empty() || a[0] != '-') {
            first = a;
            break;
        }
        std::string key = a, value;
        bool has_value = false;
        if (auto eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
            key = a.substr(0, eq);
            value = a.substr(eq + 1);
            has_value = true;
        }
        if (!among(key, g.valued)) continue;
        if (!has_value && i + 1 < args.size()) value = args[++i];
        if (among(key, g.package_opts) && !value.empty()) named.push_back(value);
    }
    if (named.empty() && !first.empty()) named.push_back(first);
    return named;
}

const Grammar kNpm{
    {"-p", "--package", "-c", "--call", "--cache", "--userconfig", "--registry", "-w",
     "--workspace", "--prefix", "--loglevel", "--script-shell", "--node-options"},
    {"-p", "--package"}};
const Grammar kUv{{"--from",
                   "--with",
                   "--with-editable",
                   "--with-requirements",
                   "-p",
                   "--python",
                   "--index",
                   "--default-index",
                   "--index-url",
                   "--extra-index-url",
                   "-f",
                   "--find-links",
                   "--cache-dir",
                   "--directory",
                   "--project",
                   "--config-file",
                   "--env-file",
                   "-c",
                   "--constraints",
                   "--overrides",
                   "--build-constraints",
                   "--python-platform",
                   "--color",
                   "-P",
                   "--upgrade-package",
                   "--refresh-package",
                   "--reinstall-package"},
                  {"--from", "--with"}};
const Grammar kPipx{{"--spec", "--python", "--pip-args", "--index-url", "--backend"}, {"--spec"}};
const Grammar kBun{{"-p", "--package", "--cwd", "--config", "-c"}, {"-p", "--package"}};
const Grammar kPnpm{{"--package", "--dir", "-C", "--reporter"}, {"--package"}};
const Grammar kYarn{{"-p", "--package", "--cwd"}, {"-p", "--package"}};

// A package named by a path (a tarball, a directory, file:…) is installed from there: nothing
// to fetch, whatever the cache holds.
bool local_spec(const std::string& spec, const std::string& cwd) {
    if (spec.rfind("file:", 0) == 0 || spec.rfind("/", 0) == 0 || spec.rfind("./", 0) == 0 ||
        spec.rfind("../", 0) == 0)
        return true;
    return !cwd.empty() && fs_probe::exists(fs_probe::absolute(spec, cwd)) &&
           spec.find('/') != std::string::npos && spec[0] != '@';
}

// npx keeps what it installs for a set of packages in ~/.npm/_npx/<hash>/, whose
// package.json lists those packages ("_npx": {"packages": [...]}) and whose node_modules
// holds them. A project's own node_modules comes first: npx runs a package found there
// without installing anything.
bool npx_has(const std::vector<std::string>& packages, const std::string& store,
             const std::string& cwd) {
    auto installed_in = [&](const std::string& dir) {
        for (const auto& p : packages)
            if (!fs_probe::is_file(dir + "/node_modules/" + package_name(p) + "/package.json"))
                return false;
        return true;
    };
    if (!cwd.empty() && installed_in(cwd)) return true;
    DIR* d = ::opendir((store + "/_npx").c_str());
    if (!d) return false;
    bool found = false;
    while (dirent* e = ::readdir(d)) {
        std::string dir = store + "/_npx/" + e->d_name;
        if (e->d_name[0] == '.' || !installed_in(dir)) continue;
        auto manifest = read_file(dir + "/package.json");
        if (!manifest) continue;
        found = std::all_of(packages.begin(), packages.end(), [&](const std::string& p) {
            return manifest->find("\"" + p + "\"") != std::string::npos;
        });
        if (found) break;
    }
    ::closedir(d);
    return found;
}

// bun keeps each package once, as <name>@<version>… in its cache (a scope is a directory).
bool bun_has(const std::vector<std::string>& packages, const std::string& cache) {
    for (const auto& p : packages) {
        const std::string name = package_name(p);
        const std::string dir = fs_probe::parent_of(cache + "/" + name);
        const std::string prefix = fs_probe::base_of(name) + "@";
        DIR* d = ::opendir(dir.c_str());
        bool found = false;
        while (d && !found)
            if (dirent* e = ::readdir(d))
                found = std::string_view(e->d_name).substr(0, prefix.size()) == prefix;
            else
                break;
        if (d) ::closedir(d);
        if (!found) return false;
    }
    return true;
}

// pipx's home, beneath the home directory. Which one pipx picks by itself depends on its
// version (~/.local/pipx before 1.3, ~/.local/share/pipx since, which still takes the old one
// when only that exists), and a confined pipx that picks one without a rule fails at its first
// mkdir. So the plan picks, and tells pipx with PIPX_HOME: the home an earlier run left
// (either), else today's default, which the relay then makes (make_launcher_cache). pipx also
// makes its bin directory (~/.local/bin) at every start, which `run` never uses, and which a
// confined pipx cannot make: PIPX_BIN_DIR puts it inside its home.
std::string pipx_home_in(const std::string& home) {
    for (const char* rel : {"/.local/share/pipx", "/.local/pipx"})
        if (fs_probe::is_dir(home + rel)) return rel;
    return "/.local/share/pipx";
}

// The launcher's word and where its own arguments begin; "" when argv runs none.
std::pair<std::string, size_t> launcher_word(const std::vector<std::string>& argv) {
    const std::string cmd = fs_probe::base_of(argv[0]);
    auto sub = [&](size_t i) { return argv.size() > i ? argv[i] : std::string(); };
    if (cmd == "npx" || cmd == "uvx" || cmd == "bunx" || cmd == "pnpx") return {cmd, 1};
    if (cmd == "npm" && (sub(1) == "exec" || sub(1) == "x")) return {"npm exec", 2};
    if (cmd == "uv" && sub(1) == "tool" && sub(2) == "run") return {"uv tool run", 3};
    if (cmd == "pipx" && sub(1) == "run") return {"pipx run", 2};
    if (cmd == "pnpm" && sub(1) == "dlx") return {"pnpm dlx", 2};
    if (cmd == "yarn" && sub(1) == "dlx") return {"yarn dlx", 2};
    return {"", 0};
}

}  // namespace

std::optional<Launcher> launcher_of(const std::vector<std::string>& argv, const std::string& home,
                                    const std::string& cwd) {
    if (argv.empty() || home.empty()) return std::nullopt;
    // Named copies: a lambda may not capture a structured binding (before C++20's rule, which
    // clang 14 does not implement).
    const auto found = launcher_word(argv);
    const std::string word = found.first;
    const auto from = found.second;
    if (word.empty()) return std::nullopt;
    Launcher l;
    l.name = word;
    auto rw = [&](const std::string& rel, const char* why) {
        l.paths.push_back({home + rel, true, word + " " + why});
    };
    auto ro = [&](const std::string& rel, const char* why) {
        l.paths.push_back({home + rel, false, word + " " + why});
    };
    if (word == "npx" || word == "npm exec") {
        l.packages = packages_in(argv, from, kNpm);
        rw("/.npm", "cache");
        ro("/.npmrc", "config");
        l.cache = home + "/.npm/_npx";
        // Offline: npm answers from its cache and fails at once (ENOTCACHED) on what is not
        // there. The update check and the audit would otherwise each ask the registry.
        l.offline_env = {"npm_config_offline=true", "npm_config_update_notifier=false",
                         "npm_config_audit=false", "npm_config_fund=false"};
        l.cached = npx_has(l.packages, home + "/.npm", cwd);
    } else if (word == "uvx" || word == "uv tool run") {
        l.packages = packages_in(argv, from, kUv);
        rw("/.cache/uv", "cache");
        ro("/.local/share/uv", "pythons and tools");
        ro("/.config/uv", "config");
        l.cache = home + "/.cache/uv";
        l.offline_env = {"UV_OFFLINE=1"};
    } else if (word == "pipx run") {
        l.packages = packages_in(argv, from, kPipx);
        const std::string pipx_home = home + pipx_home_in(home);
        rw(pipx_home.substr(home.size()), "home");
        rw("/.cache/pip", "pip cache");
        ro("/.config/pip", "pip config");
        l.cache = pipx_home + "/.cache";
        l.offline_env = {"PIP_NO_INDEX=1"};
        l.home_env = {"PIPX_HOME=" + pipx_home, "PIPX_BIN_DIR=" + pipx_home + "/bin"};
    } else if (word == "bunx") {
        l.packages = packages_in(argv, from, kBun);
        rw("/.bun/install/cache", "cache");
        ro("/.bunfig.toml", "config");
        l.cache = home + "/.bun/install/cache";
        l.cached = bun_has(l.packages, l.cache);
    } else if (word == "pnpx" || word == "pnpm dlx") {
        l.packages = packages_in(argv, from, kPnpm);
        rw("/.local/share/pnpm", "store");
        rw("/.cache/pnpm", "dlx cache");
        ro("/.npmrc", "config");
        ro("/.config/pnpm", "config");
        l.cache = home + "/.cache/pnpm/dlx";
        l.offline_env = {"npm_config_offline=true"};
    } else {  // yarn dlx
        l.packages = packages_in(argv, from, kYarn);
        rw("/.yarn/berry", "cache");
        ro("/.yarnrc.yml", "config");
        l.cache = home + "/.yarn/berry/cache";
        l.offline_env = {"YARN_ENABLE_OFFLINE_MODE=1"};
    }
    if (l.packages.empty()) l.cached.reset();  // nothing named: nothing to look for
    if (!l.packages.empty() &&
        std::all_of(l.packages.begin(), l.packages.end(),
                    [&](const std::string& p) { return local_spec(p, cwd); }))
        l.cached = true;
    return l;
}

}  // namespace warden::sandbox
