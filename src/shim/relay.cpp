#include "shim/relay.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "contain/layers.hpp"
#include "sys/json_string.hpp"
#include "sys/text.hpp"

#include "rpc/scan.hpp"
#include "shim/relay_sink.hpp"

namespace warden::shim {

std::string_view to_string(ClientLoss c) {
    switch (c) {
        case ClientLoss::none:
            return "none";
        case ClientLoss::stdin_eof:
            return "stdin_eof";
        case ClientLoss::stdout_closed:
            return "epipe";
        case ClientLoss::client_exit:
            return "client_exit";
        case ClientLoss::signal:
            return "signal";
    }
    return "?";
}

std::string_view to_string(StdoutGuard g) {
    switch (g) {
        case StdoutGuard::Divert:
            return "divert";
        case StdoutGuard::Pass:
            return "pass";
        case StdoutGuard::Fail:
            return "fail";
    }
    return "?";
}

// ---- CountingSink -----------------------------------------------------------------------

Result<int64_t> CountingSink::on_request(const rpc::Message&, std::string_view) {
    return static_cast<int64_t>(++requests);
}

void CountingSink::on_response(const Answer& a, const Outstanding* req) {
    ++responses;
    if (req) ++matched;
    if (a.outcome == rpc::Outcome::rpc_error) ++errors;
    if (a.outcome == rpc::Outcome::tool_error) ++tool_errors;
}

void CountingSink::on_client_lost(ClientLoss cause, std::span<const Outstanding> outstanding) {
    lost = cause;
    abandoned += outstanding.size();
    for (auto& o : outstanding)
        abandoned_ids.push_back(o.raw);
}

// ---- Relay ------------------------------------------------------------------------------

Relay::Relay(RelayOptions opts, Epoll ep, ActivitySink& sink)
    : opts_(opts),
      ep_(std::move(ep)),
      sink_(&sink),
      scan_(std::make_unique<Scan>()),
      client_scan_(std::make_unique<Scan>()) {}
Relay::Relay(Relay&&) noexcept = default;
Relay::~Relay() = default;

Result<Relay> Relay::create(RelayOptions opts, RelayFds fds, ActivitySink& sink) {
    // A reader that went away must come back as EPIPE, not kill us; a journal write past
    // RLIMIT_FSIZE must come back as EFBIG (deny/warn policy), not SIGXFSZ. Process-wide:
    // the spawner resets every disposition in the server, so neither leaks into it, and the
    // Session gives a library host its own back when it ends.
    ::signal(SIGPIPE, SIG_IGN);
    ::signal(SIGXFSZ, SIG_IGN);
    auto ep = Epoll::create();
    if (!ep) return ep.error();
    Relay r(opts, std::move(*ep), sink);
    if (auto s = r.setup(std::move(fds)); !s) return s.error();
    return r;
}

Status Relay::setup(RelayFds fds) {
    events_.resize(16);
    auto mk_sink = [&](int fd, Fd owned, uint32_t token) {
        auto s = std::make_unique<Sink>();
        s->reclaim = opts_.reclaim;
        s->owned = std::move(owned);
        s->fd = s->owned.valid() ? s->owned.get() : fd;
        s->token = token;
        if (s->owned.valid())
            (void)set_nonblocking(s->fd, true);
        else
            make_nonblocking_if_private(s->fd);
        return s;
    };
    auto mk_stream = [&](int fd, Fd owned, uint32_t token, Direction dir, bool framed, Sink* out) {
        return make_stream(fd, std::move(owned), token, dir, framed, out);
    };
    to_server_ = mk_sink(-1, std::move(fds.server_in), kServerIn);
    to_client_ = mk_sink(fds.client_out, Fd(), kClientOut);
    to_log_ = mk_sink(fds.log, Fd(), kLog);
    client_ = mk_stream(fds.client_in, Fd(), kClientIn, Direction::client_to_server, true,
                        to_server_.get());
    server_out_ = mk_stream(-1, std::move(fds.server_out), kServerOut, Direction::server_to_client,
                            true, to_client_.get());
    server_err_ = mk_stream(-1, std::move(fds.server_err), kServerErr, Direction::server_to_client,
                            false, to_log_.get());

    // Sinks stay registered (events 0 still reports EPOLLERR: the reader left); sources are
    // registered while they may be read (update_interest).
    for (Sink* s : {to_server_.get(), to_client_.get(), to_log_.get()}) {
        if (s->fd < 0) {
            s->closed = true;
            continue;
        }
        auto st = ep_.add(s->fd, 0, tag(kInternal, s->token));
        if (!st && st.error().code == EPERM)
            s->pollable = false;  // a regular file or /dev/null: always writable
        else if (!st)
            return st;
        else
            s->registered = true;
    }
    for (Stream* s : {client_.get(), server_out_.get(), server_err_.get()})
        if (auto st = register_stream(*s); !st) return st;
    return {};
}

std::unique_ptr<Relay::Stream> Relay::make_stream(int fd, Fd owned, uint32_t token, Direction dir,
                                                  bool framed, Sink* out) {
    auto s = std::make_unique<Stream>(opts_.max_message, opts_.read_chunk, framed);
    s->owned = std::move(owned);
    s->fd = s->owned.valid() ? s->owned.get() : fd;
    s->token = token;
    s->dir = dir;
    s->out = out;
    if (s->owned.valid())
        (void)set_nonblocking(s->fd, true);
    else
        make_nonblocking_if_private(s->fd);
    return s;
}

Status Relay::register_stream(Stream& s) {
    if (s.fd < 0) {
        s.eof = true;
        return {};
    }
    auto st = ep_.add(s.fd, EPOLLIN, tag(kInternal, s.token));
    if (!st && st.error().code == EPERM)
        s.pollable = false;  // a regular file or /dev/null: always readable
    else if (!st)
        return st;
    else
        s.registered = true;
    return {};
}

Status Relay::watch(int fd, uint32_t token) {
    auto s = ep_.add(fd, EPOLLIN, tag(kWatched, token));
    if (s) watched_.push_back(fd);
    return s;
}

Status Relay::unwatch(int fd) {
    watched_.erase(std::remove(watched_.begin(), watched_.end(), fd), watched_.end());
    return ep_.remove(fd);
}

size_t Relay::buffered() const {
    return to_server_->queued() + to_client_->queued() + to_log_->queued() +
           client_->framer.pending() + server_out_->framer.pending();
}

bool Relay::server_closed() const {
    return server_out_->eof && server_err_->eof &&
           (to_client_->closed || to_client_->queued() == 0) &&
           (to_log_->closed || to_log_->queued() == 0);
}

bool Relay::server_output_held_back() const {
    return !server_out_->eof && !server_out_->out->closed &&
           server_out_->out->queued() >= opts_.high_water;
}

// Diverted lines share our stderr: a stderr nobody reads must not grow without bound, but it
// must not stall the protocol either (divert() drops beyond the cap), so a stream's own sink
// alone decides.
bool Relay::wants_input(const Stream& s) const {
    if (s.eof) return false;
    if (s.out->closed) return true;      // reading and dropping keeps the writer unblocked
    if (s.out->lending()) return false;  // its framer's buffer is on loan (Sink)
    return s.out->queued() < opts_.high_water;
}

void Relay::update_interest() {
    if (to_server_->close_when_drained && (to_server_->closed || to_server_->queued() == 0))
        close_server_input();
    for (Stream* s : {client_.get(), server_out_.get(), server_err_.get()}) {
        if (!s->pollable || s->fd < 0) continue;
        bool want = wants_input(*s);
        if (want == s->registered) continue;
        if (want)
            s->registered = ep_.add(s->fd, EPOLLIN, tag(kInternal, s->token)).ok();
        else
            s->registered = !ep_.remove(s->fd).ok();
    }
    for (Sink* s : {to_server_.get(), to_client_.get(), to_log_.get()}) {
        if (!s->pollable || !s->registered) continue;
        bool want = !s->closed && !s->held && s->queued() > 0;
        if (want == s->want_out) continue;
        if (ep_.modify(s->fd, want ? uint32_t{EPOLLOUT} : 0u, tag(kInternal, s->token)).ok())
            s->want_out = want;
    }
}

void Relay::client_lost(ClientLoss cause) {
    if (loss_ != ClientLoss::none) return;
    loss_ = cause;
    loss_reported_ = true;  // the caller knows
    if (!client_->eof) {
        client_->eof = true;
        if (client_->registered) (void)ep_.remove(client_->fd);
        client_->registered = false;
    }
    // What the client already has is answered; the rest, being written or not, is abandoned.
    deliver_answers();
    sink_->on_client_lost(cause, outstanding());
    // Reported as abandoned: answers that still come are not matched to them, and those
    // still queued for the client will not be reported answered.
    n_outstanding_ = 0;
    pending_.clear();
    pending_head_ = 0;
}

void Relay::close_server_input() {
    Sink& s = *to_server_;
    if (s.held) {
        // Held for a server that was never woken (or never finished waking): not its to read.
        s.held = false;
        s.q.clear();
        s.head = 0;
    }
    if (s.owned.valid()) {
        (void)s.flush();
        // Bytes the client sent before it left are the server's: the EOF goes after them.
        // A server still reading gets them as it drains its pipe (update_interest() closes
        // once the queue is empty); one that never reads is ended by the teardown, and
        // the write fails.
        if (!s.closed && s.queued() > 0) {
            s.close_when_drained = true;
            return;
        }
        s.close_when_drained = false;
        if (s.registered) (void)ep_.remove(s.fd);
        s.registered = false;
        s.owned.reset();
        s.fd = -1;
    }
    s.closed = true;
    s.drop();
    // Client bytes still arriving have nowhere to go; keep reading them so the client never
    // blocks, and drop them (Sink::put on a closed sink).
}

void Relay::on_readable(Stream& s) {
    if (s.eof) return;
    if (s.framed && s.out->lending()) return;  // the framer's buffer must stay put
    if (!s.framed) {
        char buf[16384];
        ssize_t n = ::read(s.fd, buf, sizeof buf);
        if (n > 0) {
            if (gate_) last_activity_ = std::chrono::steady_clock::now();
            stats_.bytes_stderr += static_cast<size_t>(n);
            if (tap_) tap_->on_stderr(std::string_view(buf, static_cast<size_t>(n)));
            (void)s.out->put(std::string_view(buf, static_cast<size_t>(n)));
            return;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        s.eof = true;
    } else {
        auto space = s.framer.prepare();
        ssize_t n = ::read(s.fd, space.data(), space.size());
        if (n > 0) {
            if (gate_) last_activity_ = std::chrono::steady_clock::now();
            s.framer.commit(static_cast<size_t>(n));
            if (s.dir == Direction::client_to_server)
                stats_.bytes_client_to_server += static_cast<size_t>(n);
            else
                stats_.bytes_server_to_client += static_cast<size_t>(n);
            process_frames(s, false);
            return;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        // EOF (or a read error, which ends the stream the same way).
        s.eof = true;
        process_frames(s, true);
    }
    if (s.registered) (void)ep_.remove(s.fd);
    s.registered = false;
    if (&s == client_.get() && loss_ == ClientLoss::none) {
        client_lost(ClientLoss::stdin_eof);
        loss_reported_ = false;  // found here: poll() reports it
    }
}

void Relay::process_frames(Stream& s, bool eof) {
    // Consecutive forwarded frames are contiguous in the framer's buffer: send them as one
    // run, so a read of many lines costs one write.
    const char* run = nullptr;
    size_t run_len = 0;
    auto flush_run = [&] {
        if (run_len == 0) return;
        bool ok =
            s.out->put(std::string_view(run, run_len), opts_.lend ? opts_.high_water : SIZE_MAX);
        run_len = 0;
        if (s.out == to_client_.get()) wrote_to_client(ok);
    };
    for (;;) {
        auto f = eof ? s.framer.finish() : s.framer.next();
        if (!f) break;
        forward_ = true;
        // Where this frame will end in its sink's byte count if forwarded: the queued run goes
        // first (flushing the run moves it from run_len into `accepted`, so this holds).
        frame_end_ = s.out->accepted + run_len + f->bytes.size();
        if (s.dir == Direction::client_to_server)
            handle_client_frame(s, *f);
        else
            handle_server_frame(s, *f);
        if (!forward_) {
            flush_run();
            if (guard_failed_) break;
            continue;
        }
        if (run_len && run + run_len == f->bytes.data()) {
            run_len += f->bytes.size();
        } else {
            flush_run();
            run = f->bytes.data();
            run_len = f->bytes.size();
        }
        if (guard_failed_) break;
    }
    flush_run();
}

void Relay::handle_client_frame(Stream& s, const rpc::Frame& f) {
    using rpc::Kind;
    if (f.kind == rpc::Frame::Kind::oversize) {
        if (f.first) {
            ++stats_.oversize_client;
            s.oversize_bytes = 0;
            client_scan_->reset();
        }
        s.oversize_bytes += f.bytes.size();
        client_scan_->feed(f.bytes);
        if (f.first) oversize_request_starts(f.bytes);
        if (oversize_request_ == OversizeRequest::refused) forward_ = false;
        if (f.last) {
            sink_->on_oversize(Direction::client_to_server, s.oversize_bytes);
            oversize_request_ends();
        }
        return;
    }
    ++stats_.client_lines;
    if (f.kind == rpc::Frame::Kind::partial) ++stats_.partial_client;
    auto content = f.content();
    rpc::Message m = classify(*client_scan_, f);
    if (gate_ && m.kind != Kind::invalid && gate_->client_message(m, content)) {
        forward_ = false;
        return;
    }
    switch (m.kind) {
        case Kind::request: {
            ++stats_.requests;
            auto r = sink_->on_request(m, content);
            if (!r) {
                deny(m, r.error());
                forward_ = false;
                return;
            }
            track(m, *r);
            return;
        }
        case Kind::notification:
            ++stats_.notifications;
            sink_->on_notification(Direction::client_to_server, m);
            return;
        case Kind::response:
            ++stats_.client_responses;
            return;
        case Kind::invalid:
            ++stats_.invalid_client;
            sink_->on_invalid(Direction::client_to_server, content, m.reason);
            return;
        case Kind::batch: {
            // All or nothing: a batch is forwarded only if every request in it is recorded.
            // Each member is tracked under its own record as soon as it is recorded, so a
            // refusal at member k answers the members recorded before it (deny()) instead of
            // leaving them on record and in flight for ever.
            const size_t first = n_outstanding_;
            for (auto& member : *m.members) {
                if (member.kind == Kind::notification) ++stats_.notifications;
                if (member.kind != Kind::request) continue;
                ++stats_.requests;
                auto r = sink_->on_request(member, content);
                if (!r) {
                    deny(m, r.error(), first);
                    forward_ = false;
                    return;
                }
                track(member, *r);
            }
            return;
        }
    }
}

// The first piece of a client line longer than --max-message (rpc/framer.hpp), before any of
// its bytes is forwarded. What the bounded prefix shows decides: a response (result/error
// before any method), an MCP notification (a "notifications/…" method, no id so far) and
// noise (not starting with `{` or `[`) pass as before; anything else (a batch too) may be a
// request and is put to the sink like one, with what the
// prefix gives (the id when it comes before params, as most SDKs send it; the method; the
// tool). A denial refuses the whole line: none of its pieces is forwarded, and its end is
// answered with a JSON-RPC error (oversize_request_ends).
void Relay::oversize_request_starts(std::string_view prefix) {
    oversize_request_ = OversizeRequest::none;
    const Scan& sc = *client_scan_;
    if (!rpc::starts_like_json(prefix)) return;  // noise, as invalid as a short line of it
    if ((sc.has_result || sc.has_error) && !sc.has_method) return;
    if (sc.id_type == rpc::IdType::none && sc.method.rfind("notifications/", 0) == 0) return;
    ++stats_.requests;
    rpc::Message m;
    m.kind = rpc::Kind::request;
    m.id = rpc::Id{sc.id_type, sc.id};
    m.method = sc.method;
    m.tool = sc.tool;
    auto r = sink_->on_oversize_request(m, prefix);
    if (!r) {
        oversize_request_ = OversizeRequest::refused;
        oversize_denial_ = r.error();
        return;
    }
    oversize_request_ = OversizeRequest::recorded;
    oversize_record_ = *r;
    track(m, *r);  // now: a client lost before the last piece abandons it
}

// Its last piece: the id is known now wherever it stood (the TypeScript SDK writes it after
// params). A recorded request tracked without an id takes it, so its answer resolves the
// record; one that has none (a notification after all) keeps no id, which no answer matches,
// and is settled as abandoned when the session ends. A refused one is answered now.
void Relay::oversize_request_ends() {
    const Scan& sc = *client_scan_;
    if (oversize_request_ == OversizeRequest::refused) {
        rpc::Message m;
        m.kind = rpc::Kind::request;
        m.id = sc.id_type == rpc::IdType::none ? rpc::Id{rpc::IdType::null, "null"}
                                               : rpc::Id{sc.id_type, sc.id};
        deny(m, oversize_denial_);
    } else if (oversize_request_ == OversizeRequest::recorded && sc.id_type != rpc::IdType::none) {
        for (size_t i = n_outstanding_; i-- > 0;) {
            Outstanding& o = slots_[i];
            if (o.record != oversize_record_ || o.type != rpc::IdType::none) continue;
            o.type = sc.id_type;
            o.raw = sc.id;
            break;
        }
    }
    oversize_request_ = OversizeRequest::none;
}

// Parsed in place up to the parse limit; beyond it scanned (relay.hpp, "Long lines"), with
// `scan`, which no oversize line is using now (its pieces come one after the other).
rpc::Message Relay::classify(Scan& scan, const rpc::Frame& f) {
    auto content = f.content();
    if (content.size() <= opts_.parse_limit) return classifier_.classify(content, f.capacity);
    ++stats_.scanned;
    scan.reset();
    scan.feed(content);
    return scan.message(content);
}

bool Relay::guard_rejects(const rpc::Message& m, std::string_view content) const {
    if (opts_.guard == StdoutGuard::Pass) return false;
    if (m.json) return false;
    if (m.utf8_error && rpc::starts_like_json(content)) return false;
    return true;
}

void Relay::handle_server_frame(Stream& s, const rpc::Frame& f) {
    using rpc::Kind;
    if (f.kind == rpc::Frame::Kind::oversize) {
        if (f.first) {
            ++stats_.oversize_server;
            s.oversize_bytes = 0;
            divert_oversize_ = opts_.guard != StdoutGuard::Pass && !rpc::starts_like_json(f.bytes);
            if (divert_oversize_ && opts_.guard == StdoutGuard::Fail) {
                stop_server_output();
                forward_ = false;
                return;
            }
        }
        s.oversize_bytes += f.bytes.size();
        if (f.last) sink_->on_oversize(Direction::server_to_client, s.oversize_bytes);
        if (divert_oversize_) {
            divert(f);
            forward_ = false;
            return;
        }
        if (f.first) scan_->reset();
        scan_->feed(f.bytes);
        if (f.last)
            oversize_answer_read(*scan_, s.oversize_bytes - (f.bytes.size() - f.content().size()));
        return;
    }
    ++stats_.server_lines;
    if (f.kind == rpc::Frame::Kind::partial) ++stats_.partial_server;
    auto content = f.content();
    rpc::Message m = classify(*scan_, f);
    if (guard_rejects(m, content)) {
        forward_ = false;
        if (opts_.guard == StdoutGuard::Fail) {
            stop_server_output();
            return;
        }
        divert(f);
        return;
    }
    switch (m.kind) {
        case Kind::response:
            if (gate_ && gate_->server_response(m, content)) {
                forward_ = false;
                return;
            }
            answer_read(m, content);
            return;
        case Kind::request:
            ++stats_.server_requests;
            return;
        case Kind::notification:
            ++stats_.notifications;
            if (gate_) gate_->server_notification(m);
            sink_->on_notification(Direction::server_to_client, m);
            return;
        case Kind::invalid:
            ++stats_.invalid_server;
            sink_->on_invalid(Direction::server_to_client, content, m.reason);
            return;
        case Kind::batch:
            for (auto& member : *m.members)
                if (member.kind == Kind::response) answer_read(member, content);
            return;
    }
}

std::optional<Relay::Wake> Relay::pending_wake() {
    if (guard_failed_ && !guard_reported_) {
        guard_reported_ = true;
        return Wake{Wake::What::guard_failed, 0, 0, loss_};
    }
    if (loss_ != ClientLoss::none && !loss_reported_) {
        loss_reported_ = true;
        return Wake{Wake::What::client_lost, 0, 0, loss_};
    }
    if (gate_ && gate_->wants_attention()) return Wake{Wake::What::gate, 0, 0, loss_};
    if (!server_closed_reported_ && server_closed()) {
        server_closed_reported_ = true;
        return Wake{Wake::What::server_closed, 0, 0, loss_};
    }
    return std::nullopt;
}

Result<std::optional<Relay::Wake>> Relay::pump(int timeout_ms) {
    // Fds epoll cannot watch (regular files, /dev/null) are always ready: do not sleep.
    bool busy = false;
    for (Stream* s : {client_.get(), server_out_.get(), server_err_.get()})
        if (!s->pollable && wants_input(*s)) busy = true;
    for (Sink* s : {to_server_.get(), to_client_.get(), to_log_.get()})
        if (!s->pollable && !s->closed && s->queued() > 0) busy = true;
    auto n = ep_.wait(events_, busy ? 0 : timeout_ms);
    if (!n) return n.error();
    std::optional<Wake> watched;
    for (int i = 0; i < *n; ++i) {
        const auto& ev = events_[static_cast<size_t>(i)];
        uint32_t token = static_cast<uint32_t>(ev.data.u64 & 0xffffffffu);
        if ((ev.data.u64 >> 32) == kWatched) {
            if (!watched) watched = Wake{Wake::What::watched, token, ev.events, loss_};
            continue;
        }
        switch (token) {
            case kClientIn:
                on_readable(*client_);
                break;
            case kServerOut:
                on_readable(*server_out_);
                break;
            case kServerErr:
                on_readable(*server_err_);
                break;
            case kServerIn:
            case kClientOut:
            case kLog: {
                Sink& s = token == kServerIn    ? *to_server_
                          : token == kClientOut ? *to_client_
                                                : *to_log_;
                bool ok = (ev.events & EPOLLERR) ? s.fail() : s.flush();
                if (!ok) {
                    if (s.registered) (void)ep_.remove(s.fd);
                    s.registered = false;
                }
                if (&s == to_client_.get()) wrote_to_client(ok);
                break;
            }
        }
    }
    if (busy) {
        for (Stream* s : {client_.get(), server_out_.get(), server_err_.get()})
            if (!s->pollable && wants_input(*s)) on_readable(*s);
        for (Sink* s : {to_server_.get(), to_client_.get(), to_log_.get()}) {
            if (s->pollable) continue;
            bool ok = s->flush();
            if (s == to_client_.get()) wrote_to_client(ok);
        }
    }
    update_interest();
    return watched;
}

Result<Relay::Wake> Relay::poll(int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        if (auto w = pending_wake()) return *w;
        int t = -1;
        if (timeout_ms >= 0) {
            // Rounded up: epoll_wait counts whole milliseconds, and a remainder rounded down
            // to 0 would return at once and come round again, spinning until the deadline.
            auto left = std::chrono::ceil<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            t = static_cast<int>(std::max<int64_t>(0, left.count()));
        }
        auto r = pump(t);
        if (!r) return r.error();
        if (auto w = pending_wake()) return *w;
        if (*r) return **r;
        if (timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline)
            return Wake{Wake::What::timeout, 0, 0, loss_};
    }
}

void Relay::drain(int timeout_ms) {
    for (int fd : watched_)
        (void)ep_.remove(fd);
    watched_.clear();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        bool sources_done = server_out_->eof && server_err_->eof;
        bool flushed = (to_client_->closed || to_client_->queued() == 0) &&
                       (to_log_->closed || to_log_->queued() == 0);
        if (sources_done && flushed) return;
        auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now());
        if (left.count() <= 0) return;
        if (!pump(static_cast<int>(left.count()))) return;
    }
}

}  // namespace warden::shim
