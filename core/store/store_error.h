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

// The run folder belongs to another job (two jobs named one folder): the
// caller picks a fresh folder or refuses, never mixes the two runs.
class RunTaken : public StoreError {
  public:
    using StoreError::StoreError;
};

}  // namespace meshscope
