// The commands a command line runs, found as the process would find them, so that the
// sandbox can give each its files before any of them runs.
//
// A client config often names a wrapper rather than the server: `sh -c 'python3 server.py'`,
// `bash -c 'cd /srv/mcp && node server.js'`, `env FOO=1 node server.js`, `python3 -m
// my_server`. The file that matters (server.py, server.js, the module) is then not an
// argument of the command the sandbox is given but a word inside one, or a name the
// interpreter resolves; without a rule for it the confined server dies at once on EACCES,
// before it has said a word, and the client reports a closed connection.
//
// So the command line is read as its programs read it:
//   - a shell's `-c` string is split into its simple commands (`;`, `&&`, `||`, `|`, `&`,
//     new lines), quotes and backslashes honoured, leading NAME=value words and `exec`,
//     `command`, `nohup` skipped, and a literal `cd DIR` followed, so that `cd DIR && node
//     server.js` names DIR/server.js. A word with an unquoted `$` or backquote is left out:
//     what it expands to is known only when the shell runs, and nothing is allowed on a guess;
//   - `env` skips its options (-i, -u NAME, -C DIR, which it follows, -S STRING, which it
//     splits) and its NAME=value words;
//   - each command found is read again (a shell started by env, env started by a shell), to a
//     bounded depth.
// `python -m MODULE` is then found as the interpreter would find it (python_module_path).
#pragma once

#include <string>
#include <vector>

namespace warden::sandbox {

// One command a command line runs, and the directory it runs in.
struct Invocation {
    std::vector<std::string> argv;
    std::string cwd;
};

// `argv` itself first, then every command named inside it (see the top of this file).
std::vector<Invocation> invocations_of(const std::vector<std::string>& argv,
                                       const std::string& cwd);

// The words and simple commands of a shell's -c string (exposed for its test): each simple
// command's words, a word the shell would expand at run time replaced by "".
std::vector<std::vector<std::string>> shell_commands(const std::string& script);

// Where `python -m MODULE` finds MODULE: the first of `search` (the interpreter's sys.path
// entries that precede its installation: the working directory, then PYTHONPATH's, then the
// user's site-packages) that holds MODULE's top package (TOP/ or TOP.py, for "top.sub"). The
// path on sys.path where it was found and the top package's path; empty when none holds it
// (the module is then in the interpreter's own installation, which has its rule already).
struct ModuleFound {
    std::string search_dir;
    std::string top;
};
ModuleFound python_module_path(const std::string& module, const std::vector<std::string>& search);

// The interpreter's search path ahead of its installation, for a `-m` given in `cwd`:
// cwd, each entry of `pythonpath` (colon-separated; empty: none), and `home`'s
// ~/.local/lib/python3.*/site-packages.
std::vector<std::string> python_search_path(const std::string& cwd, const std::string& pythonpath,
                                            const std::string& home);

}  // namespace warden::sandbox
