#include "capture/agent/interop/launcher_status.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/model/settings.h"

namespace meshscope {
namespace {

// Sends one datagram to record's abstract socket; never blocks, never throws.
void send(const nlohmann::json& message) {
    const char* name = std::getenv(std::string(setting("status_socket").env).c_str());
    if (!name || !*name) return;
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    size_t length = std::strlen(name);
    if (length + 1 > sizeof address.sun_path) return;
    std::memcpy(address.sun_path + 1, name, length);  // abstract: a leading NUL, no file
    int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    std::string text = message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    (void)::sendto(fd, text.data(), text.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
                   reinterpret_cast<const sockaddr*>(&address),
                   socklen_t(offsetof(sockaddr_un, sun_path) + 1 + length));
    ::close(fd);
}

}  // namespace

void tellLauncherAttached(int rank, const std::string& file, const std::string& notRecording) {
    nlohmann::json m = {{"event", notRecording.empty() ? "attached" : "not_recording"},
                        {"rank", rank},
                        {"pid", ::getpid()},
                        {"file", file}};
    if (!notRecording.empty()) m["why"] = notRecording;
    send(m);
}

void tellLauncherClosed(int rank, const WriterStats& stats) {
    nlohmann::json drops = nlohmann::json::object();
    for (int i = 0; i < kDropReasonCount; ++i)
        if (stats.drops[i]) drops[std::string(toString(DropReason(i)))] = stats.drops[i];
    send({{"event", "closed"},
          {"rank", rank},
          {"pid", ::getpid()},
          {"submitted", stats.submitted},
          {"written", stats.written},
          {"drops", drops}});
}

}  // namespace meshscope
