// A stdio server as a client config declares it: what discover.hpp reads from the configs,
// and what the inventory's scan is handed to name the processes that run one
// (inventory/inventory.hpp, ScanOptions::declared).
#pragma once

#include <string>
#include <vector>

#include "clients/config_doc.hpp"

namespace warden::clients {

// One stdio server a client config declares (remote servers are not listed).
struct DeclaredServer {
    std::string client;  // ClientInfo::id
    std::string file;    // absolute path of the config file
    Scope scope = Scope::User;
    std::string project;  // Local scope: the project directory it belongs to
    std::string name;
    std::string command;  // as written: no variable is expanded
    std::vector<std::string> args;
    bool wrapped = false;  // command is mcpwarden and args start with "run"
    bool disabled = false;
    // The server itself: what follows "--" when wrapped, else command and args again.
    std::string inner_command;
    std::vector<std::string> inner_args;
};

}  // namespace warden::clients
