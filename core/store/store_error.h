#pragma once

#include <stdexcept>
#include <string>

namespace meshscope {

// An error a user can cause with a run on disk: a missing, damaged, foreign or
// version-mismatched file, a bad manifest. what() is one line that names the
// file and the problem, ready to print.
class StoreError : public std::runtime_error {
  public:
    StoreError(const std::string& path, const std::string& problem)
        : std::runtime_error(path + ": " + problem), m_path(path), m_problem(problem) {}

    const std::string& path() const { return m_path; }
    const std::string& problem() const { return m_problem; }

  private:
    std::string m_path;
    std::string m_problem;
};

}  // namespace meshscope
