#include "app/cli/gzip_output.h"

#include <stdexcept>
#include <vector>

#ifdef MESHSCOPE_HAVE_ZLIB
#include <zlib.h>
#endif

namespace meshscope::cli {

#ifdef MESHSCOPE_HAVE_ZLIB

bool gzipAvailable() {
    return true;
}

class GzipOutput::Buffer : public std::streambuf {
  public:
    explicit Buffer(std::ostream& sink) : m_sink(sink), m_in(1 << 18), m_out(1 << 18) {
        // 15 window bits + 16: a gzip header and trailer instead of zlib's
        if (deflateInit2(&m_z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
            throw std::runtime_error("cannot start gzip compression");
        setp(m_in.data(), m_in.data() + m_in.size());
    }
    ~Buffer() override { deflateEnd(&m_z); }

    bool finish() {
        if (m_finished) return m_ok;
        m_finished = true;
        return compress(Z_FINISH) && m_sink.flush();
    }

  protected:
    int overflow(int c) override {
        if (!compress(Z_NO_FLUSH)) return traits_type::eof();
        if (c != traits_type::eof()) {
            *pptr() = char(c);
            pbump(1);
        }
        return traits_type::not_eof(c);
    }
    int sync() override { return compress(Z_NO_FLUSH) ? 0 : -1; }

  private:
    // Deflates what is buffered and writes it; Z_FINISH also ends the stream.
    bool compress(int flush) {
        if (!m_ok) return false;
        m_z.next_in = reinterpret_cast<Bytef*>(pbase());
        m_z.avail_in = uInt(pptr() - pbase());
        int rc = Z_OK;
        do {
            m_z.next_out = reinterpret_cast<Bytef*>(m_out.data());
            m_z.avail_out = uInt(m_out.size());
            rc = deflate(&m_z, flush);
            if (rc == Z_STREAM_ERROR) return m_ok = false;
            m_sink.write(m_out.data(), std::streamsize(m_out.size() - m_z.avail_out));
            if (!m_sink) return m_ok = false;
        } while (m_z.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
        setp(m_in.data(), m_in.data() + m_in.size());
        return true;
    }

    std::ostream& m_sink;
    std::vector<char> m_in, m_out;
    z_stream m_z{};
    bool m_ok = true, m_finished = false;
};

GzipOutput::GzipOutput(std::ostream& sink)
    : std::ostream(nullptr), m_buffer(std::make_unique<Buffer>(sink)) {
    rdbuf(m_buffer.get());
}

GzipOutput::~GzipOutput() = default;

bool GzipOutput::finish() {
    flush();
    return m_buffer->finish();
}

#else

bool gzipAvailable() {
    return false;
}

class GzipOutput::Buffer : public std::streambuf {};

GzipOutput::GzipOutput(std::ostream&) : std::ostream(nullptr) {
    throw std::runtime_error("this meshscope was built without zlib: cannot write gzip");
}

GzipOutput::~GzipOutput() = default;

bool GzipOutput::finish() {
    return false;
}

#endif

}  // namespace meshscope::cli
