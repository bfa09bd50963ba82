#include "core/store/writer_process.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

namespace meshscope {

bool writerProcessRuns(const RankInfo& info) {
    char host[HOST_NAME_MAX + 1] = {};
    if (info.pid <= 0 || info.pid > INT_MAX || gethostname(host, sizeof host) != 0 ||
        info.hostname != host)
        return false;
    return ::kill(pid_t(info.pid), 0) == 0 || errno == EPERM;
}

}  // namespace meshscope
