// Minimal unit-test harness: TEST(name) { CHECK(cond); CHECK_EQ(a, b); }
// main() runs every test and prints "N passed, N failed" (read by CI).
#pragma once
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace q4m_test {
struct TestCase { const char* name; std::function<void()> fn; };
inline std::vector<TestCase>& registry() { static std::vector<TestCase> r; return r; }
inline int& failures_in_current() { static int n = 0; return n; }
struct Registrar { Registrar(const char* n, std::function<void()> f) { registry().push_back({n, std::move(f)}); } };
inline void fail(const char* file, int line, const std::string& what) {
  std::fprintf(stderr, "  FAILED %s:%d: %s\n", file, line, what.c_str());
  failures_in_current()++;
}
}  // namespace q4m_test

#define TEST(name)                                                          \
  static void test_##name();                                                \
  static q4m_test::Registrar registrar_##name(#name, test_##name);          \
  static void test_##name()

#define CHECK(cond) \
  do { if (!(cond)) q4m_test::fail(__FILE__, __LINE__, "CHECK(" #cond ")"); } while (0)
#define CHECK_EQ(a, b)                                                               \
  do {                                                                               \
    auto va_ = (a); auto vb_ = (b);                                                  \
    if (!(va_ == vb_)) {                                                             \
      std::ostringstream os_; os_ << "CHECK_EQ(" #a ", " #b "): " << va_ << " != " << vb_; \
      q4m_test::fail(__FILE__, __LINE__, os_.str());                                \
    }                                                                                \
  } while (0)
#define REQUIRE(cond) \
  do { if (!(cond)) { q4m_test::fail(__FILE__, __LINE__, "REQUIRE(" #cond ")"); return; } } while (0)

int main(int argc, char** argv) {
  int passed = 0, failed = 0;
  for (auto& t : q4m_test::registry()) {
    if (argc > 1 && std::string(argv[1]) != t.name) continue;
    q4m_test::failures_in_current() = 0;
    t.fn();
    if (q4m_test::failures_in_current()) { failed++; std::fprintf(stderr, "FAIL %s\n", t.name); }
    else { passed++; std::fprintf(stderr, "ok   %s\n", t.name); }
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
