#pragma once

// A gzip-compressed std::ostream over another stream (zlib's deflate with a
// gzip header), for exports written to a `.gz` file. Built only when zlib is
// found (MESHSCOPE_HAVE_ZLIB).

#include <memory>
#include <ostream>
#include <streambuf>
#include <string_view>

namespace meshscope::cli {

// Whether `path` names a gzip file (".gz").
inline bool isGzipPath(std::string_view path) {
    return path.size() > 3 && path.substr(path.size() - 3) == ".gz";
}

// Whether this build can write gzip.
bool gzipAvailable();

// Runs `write` on `out`, through a GzipOutput when `gzip`; a compressor
// that fails to finish marks `out` bad, as a failed write would.
template <typename Write>
void writeMaybeGzip(std::ostream& out, bool gzip, Write&& write);

class GzipOutput : public std::ostream {
  public:
    // Compresses into `sink` (level 6); finish() writes the trailer.
    explicit GzipOutput(std::ostream& sink);
    ~GzipOutput() override;
    // Flushes the compressor and writes the gzip trailer; false on error.
    bool finish();

  private:
    class Buffer;
    std::unique_ptr<Buffer> m_buffer;
};

template <typename Write>
void writeMaybeGzip(std::ostream& out, bool gzip, Write&& write) {
    if (!gzip) {
        write(out);
        return;
    }
    GzipOutput gz(out);
    write(gz);
    if (!gz.finish()) out.setstate(std::ios::badbit);
}

}  // namespace meshscope::cli
