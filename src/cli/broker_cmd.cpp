// `mcpwarden broker`: the user's broker of `run --share` (docs/SHARING.md). The first
// `run --share` starts it detached, or the systemd user unit does; nobody needs to run it
// by hand.
#include <cstdio>
#include <string>

#include "command.hpp"
#include "mcpwarden/reap.hpp"
#include "mcpwarden/share.hpp"

namespace warden::cli {
namespace {

std::string& linger_arg() {
    static std::string s = "60s";
    return s;
}

std::string& client_queue_arg() {
    static std::string s;
    return s;
}

int broker_main() {
    auto linger = api::parse_duration(linger_arg());
    if (!linger) {
        std::fprintf(stderr, "mcpwarden broker: --linger: %s\n", linger.error().message.c_str());
        return 2;
    }
    return api::run_broker(*linger, client_queue_arg());
}

const Command broker_cmd(950, [](CLI::App& app) {
    auto* sub = app.add_subcommand(
        "broker",
        "Serve the sessions of `run --share` for this user (started by the first one, "
        "exits when it holds no client and no tree; docs/SHARING.md)");
    sub->add_option("--linger", linger_arg(),
                    "How long to wait for a first client before exiting (default 60s)");
    sub->add_option("--client-queue", client_queue_arg(),
                    "The most a client's unread answers may take before that client is dropped "
                    "(default 16MiB; MCPWARDEN_SHARE_CLIENT_QUEUE)");
    return Bound{sub, broker_main};
});

}  // namespace
}  // namespace warden::cli
