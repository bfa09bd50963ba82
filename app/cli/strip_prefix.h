#pragma once

// An output stream that writes through to another with every occurrence of
// one text removed: `report --source-root DIR` shows each recorded path
// under DIR relative to it, in every format, wherever the report names it
// (sites, stacks, fixes, evidence). Streams: a report of gigabytes is
// never held whole; a match split across two writes is still found.

#include <algorithm>
#include <ostream>
#include <streambuf>
#include <string>

namespace meshscope::cli {

class StripPrefixStream : public std::ostream {
  public:
    StripPrefixStream(std::ostream& sink, std::string text)
        : std::ostream(&m_buffer), m_buffer(sink, std::move(text)) {}
    ~StripPrefixStream() override { m_buffer.finish(); }
    // Writes what is held back; false when the sink failed.
    bool finish() { return m_buffer.finish(); }

  private:
    class Buffer : public std::streambuf {
      public:
        Buffer(std::ostream& sink, std::string text) : m_sink(sink), m_text(std::move(text)) {}
        bool finish() {
            m_sink << m_pending;
            m_pending.clear();
            return bool(m_sink);
        }

      protected:
        int_type overflow(int_type c) override {
            if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
            char ch = traits_type::to_char_type(c);
            xsputn(&ch, 1);
            return c;
        }
        std::streamsize xsputn(const char* data, std::streamsize n) override {
            if (m_text.empty()) {
                m_sink.write(data, n);
                return m_sink ? n : 0;
            }
            m_pending.append(data, size_t(n));
            std::string out;
            size_t from = 0;
            for (size_t at = m_pending.find(m_text); at != std::string::npos;
                 at = m_pending.find(m_text, from)) {
                out.append(m_pending, from, at - from);
                from = at + m_text.size();
            }
            // keep back what could be the start of a match
            size_t keep = std::min(m_pending.size() - from, m_text.size() - 1);
            out.append(m_pending, from, m_pending.size() - from - keep);
            m_pending.erase(0, m_pending.size() - keep);
            m_sink.write(out.data(), std::streamsize(out.size()));
            return m_sink ? n : 0;
        }

      private:
        std::ostream& m_sink;
        std::string m_text;
        std::string m_pending;
    };
    Buffer m_buffer;
};

}  // namespace meshscope::cli
