// tests/common — the helpers every test binary links (library warden_testing).
//
// One include for all of them. They read /proc directly and never use src/proc, so tests of
// the lower layers have an independent oracle:
//   child.hpp       TestChild: fork+exec with piped stdio, tagged, killed with its tree
//   tree_guard.hpp  TreeGuard: a tree (ppid walk + kTagVar tag) SIGKILLed by (pid, starttime)
//   procfs.hpp      read_stat, thread_nice, is_live, env_value, status_mask, descendants_of,
//                   live_tagged, listening_inodes, holds_socket
//   util.hpp        wait_until, wait_for_file, read_port_file, port_bindable, unique_tag, TempDir
//   jsonrpc.hpp     rpc_initialize / rpc_tools_list / rpc_tools_call, read_response
//   fixture.hpp     fixture_argv, start_fixture (the fixture MCP server, its tree built)
//   paths.hpp       kFixture, kCli, kSourceDir
#pragma once

#include "common/child.hpp"
#include "common/fixture.hpp"
#include "common/jsonrpc.hpp"
#include "common/paths.hpp"
#include "common/procfs.hpp"
#include "common/tree_guard.hpp"
#include "common/util.hpp"
