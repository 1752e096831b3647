// The relay's side of hibernation (shim/hibernation.hpp): the server's input held while it
// sleeps, its new pipes attached when it wakes.
#include <poll.h>

#include <chrono>

#include "shim/relay_sink.hpp"

namespace warden::shim {

void Relay::answer_client(std::string_view line) {
    scratch_.assign(line);
    scratch_ += '\n';
    wrote_to_client(to_client_->put(scratch_));
}

std::optional<std::chrono::steady_clock::time_point> Relay::idle_since() const {
    if (n_outstanding_ > 0 || stats_.server_requests > stats_.client_responses) return std::nullopt;
    if (to_server_->queued() > 0 || to_client_->queued() > 0 || pending_head_ < pending_.size())
        return std::nullopt;
    if (client_->framer.pending() > 0 || server_out_->framer.pending() > 0) return std::nullopt;
    if (oversize_request_ != OversizeRequest::none) return std::nullopt;
    return last_activity_;
}

void Relay::detach_server() {
    Sink& s = *to_server_;
    if (s.registered) (void)ep_.remove(s.fd);
    s.registered = false;
    s.want_out = false;
    s.owned.reset();
    s.fd = -1;
    s.close_when_drained = false;
    s.closed = false;
    s.held = true;
    s.q.clear();
    s.head = 0;
}

Status Relay::attach_server(Fd server_in, Fd server_out, Fd server_err) {
    // The last server's streams are at their EOF (its tree is gone); whatever they still
    // hold in a framer is the last server's and ends here.
    for (Stream* st : {server_out_.get(), server_err_.get()})
        if (st->registered) (void)ep_.remove(st->fd);
    server_out_ = make_stream(-1, std::move(server_out), kServerOut, Direction::server_to_client,
                              true, to_client_.get());
    server_err_ = make_stream(-1, std::move(server_err), kServerErr, Direction::server_to_client,
                              false, to_log_.get());
    for (Stream* st : {server_out_.get(), server_err_.get()})
        if (auto r = register_stream(*st); !r) return r;
    Sink& s = *to_server_;
    s.owned = std::move(server_in);
    s.fd = s.owned.get();
    (void)set_nonblocking(s.fd, true);
    s.closed = false;
    s.want_out = false;
    auto r = ep_.add(s.fd, 0, tag(kInternal, s.token));
    if (!r) return r;
    s.registered = true;
    server_closed_reported_ = false;
    guard_failed_ = guard_reported_ = false;
    return {};
}

bool Relay::write_to_server_now(std::string_view bytes) {
    Sink& s = *to_server_;
    if (s.fd < 0) return false;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (!bytes.empty()) {
        ssize_t r = ::write(s.fd, bytes.data(), bytes.size());
        if (r > 0) {
            bytes.remove_prefix(static_cast<size_t>(r));
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN && std::chrono::steady_clock::now() < deadline) {
            pollfd p{s.fd, POLLOUT, 0};
            (void)::poll(&p, 1, 100);
            continue;
        }
        return false;
    }
    return true;
}

void Relay::release_server_input() {
    Sink& s = *to_server_;
    s.held = false;
    if (!s.flush() && s.registered) {
        (void)ep_.remove(s.fd);
        s.registered = false;
    }
    update_interest();
}

}  // namespace warden::shim
