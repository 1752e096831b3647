// run_shared() and run_broker(): `mcpwarden run --share` and `mcpwarden broker` over src/share.
#include <cstdio>
#include <cstdlib>

#include "api/internal.hpp"
#include "mcpwarden/share.hpp"
#include "share/broker.hpp"
#include "share/client.hpp"
#include "shim/options.hpp"

namespace warden::api {

bool inside_shared_tree() {
    const char* tree = std::getenv(share::kTreeVar);
    return tree && *tree;
}

Result<int> run_shared(const RunSettings& s,
                       const std::vector<std::pair<std::string, std::string>>& flags) {
    // What the tree's run is started with: these flags but the share ones (the environment,
    // the settings files and the working directory go with the hello), and the command.
    std::vector<std::string> argv{"run"};
    for (const auto& [key, value] : flags) {
        if (key == "share" || key == "share-linger") continue;
        argv.push_back("--" + key);
        if (!run_option_is_switch(key)) argv.push_back(value);
    }
    argv.push_back("--");
    argv.insert(argv.end(), s.options.command.begin(), s.options.command.end());
    // Every effective option but the share ones is part of the identity: a tree is shared
    // only by sessions that would run it alike.
    std::string settings;
    for (const Setting& v : s.settings)
        if (v.key != "share" && v.key != "share-linger")
            settings += v.section + "." + v.key + "=" + v.value + "\n";
    const std::string identity = share::share_identity(s.options, settings);
    auto rc = share::run_share_client(share::make_hello(s.options, identity, std::move(argv)),
                                      s.options.share_linger);
    if (!rc) return rc.error();
    return *rc;
}

int run_broker(std::chrono::milliseconds linger, const std::string& client_queue) {
    share::BrokerOptions o;
    std::string queue = client_queue;
    if (const char* env = std::getenv("MCPWARDEN_SHARE_CLIENT_QUEUE"); queue.empty() && env)
        queue = env;
    if (!queue.empty()) {
        auto size = shim::parse_size(queue);
        if (!size || *size == 0) {
            std::fprintf(stderr, "mcpwarden broker: --client-queue: %s\n",
                         size ? "must be more than 0 bytes" : size.error().message.c_str());
            return 2;
        }
        o.client_queue = *size;
    }
    auto where = share::rendezvous();
    if (!where) {
        std::fprintf(stderr, "mcpwarden broker: %s\n", where.error().message.c_str());
        return 1;
    }
    o.where = *where;
    o.linger = linger;
    return share::run_broker(o);
}

}  // namespace warden::api
