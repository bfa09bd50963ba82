#include "capture/agent/ops/device_timer.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <thread>

namespace meshscope::capture {

DeviceTimer::DeviceTimer(RankWriter& writer, std::function<void(const std::string&)> warn)
    : m_writer(writer), m_warn(std::move(warn)) {}

void DeviceTimer::Span::start(c10::Device device) {
    m_device = device;
    m_start = m_timer.recorded(device, /*opening=*/true);
}

void DeviceTimer::Span::release() {
    std::lock_guard lock(m_timer.m_mutex);
    if (m_start) m_timer.recycle(std::move(*m_start));
    if (m_end) m_timer.recycle(std::move(*m_end));
}

void DeviceTimer::Span::finish(OpSeq op) {
    end();
    if (!m_end || !op) return;
    m_timer.finish(std::move(*m_start), std::move(*m_end), op);
    m_start.reset();
    m_end.reset();
}

std::optional<c10::Event> DeviceTimer::recorded(c10::Device device, bool opening) {
    std::unique_lock lock(m_mutex);
    if (opening) {
        if (m_off.count(device.type())) return std::nullopt;
        // a full queue: what has finished makes room, else the op goes untimed
        while (m_pending.size() >= kMaxPending && resolveFront()) {
        }
        if (m_pending.size() >= kMaxPending) {
            ++m_dropped;
            return std::nullopt;
        }
    }
    try {
        c10::Event event = takeEvent(device);
        lock.unlock();
        const c10::impl::DeviceGuardImplInterface* impl =
            c10::impl::getDeviceGuardImpl(device.type());
        event.record(impl->getStream(device));
        return event;
    } catch (const std::exception& e) {  // no events, or no timing, on this backend
        if (!lock.owns_lock()) lock.lock();
        disable(device.type(), e.what());
        return std::nullopt;
    }
}

void DeviceTimer::finish(c10::Event start, c10::Event end, OpSeq op) {
    std::lock_guard lock(m_mutex);
    m_pending.push_back({std::move(start), std::move(end), op});
}

bool DeviceTimer::poll() {
    std::lock_guard lock(m_mutex);
    while (resolveFront()) {
    }
    return !m_pending.empty();
}

void DeviceTimer::drain(std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    std::unique_lock lock(m_mutex);
    while (!m_pending.empty() && std::chrono::steady_clock::now() < deadline) {
        if (resolveFront()) continue;
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        lock.lock();
    }
    m_dropped += m_pending.size();
    m_pending.clear();
}

uint64_t DeviceTimer::dropped() const {
    std::lock_guard lock(m_mutex);
    return m_dropped;
}

c10::Event DeviceTimer::takeEvent(c10::Device device) {
    auto it = m_spare.find(device);
    if (it == m_spare.end() || it->second.empty())
        return c10::Event(device.type(), c10::EventFlag::BACKEND_DEFAULT);  // timing on
    c10::Event event = std::move(it->second.back());
    it->second.pop_back();
    return event;
}

void DeviceTimer::recycle(c10::Event event) {
    // Recorded events are tied to their device; fresh ones to none yet.
    c10::Device device = event.device();
    m_spare[device].push_back(std::move(event));
}

// Writes the oldest queued duration if its op has finished on the device;
// false when there is none or it is still running. Never waits.
bool DeviceTimer::resolveFront() {
    if (m_pending.empty()) return false;
    Pending& front = m_pending.front();
    try {
        if (!front.end.query()) return false;
        double ms = front.start.elapsedTime(front.end);
        m_writer.submit(Record{DeviceTimeRecord{front.op, int64_t(ms * 1e6), std::nullopt}});
    } catch (const std::exception& e) {
        ++m_dropped;
        disable(front.start.device_type(), e.what());
    }
    recycle(std::move(front.start));
    recycle(std::move(front.end));
    m_pending.pop_front();
    return true;
}

void DeviceTimer::disable(c10::DeviceType type, const std::string& why) {
    if (!m_off.insert(type).second) return;
    m_warn("meshscope: no GPU durations of ops on " +
           c10::DeviceTypeName(type, /*lower_case=*/true) + " (" + why.substr(0, why.find('\n')) +
           ")");
}

}  // namespace meshscope::capture
