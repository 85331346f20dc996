// The std::regex AOTInductor's wrapper runs at load (model_base.h, parse_device_str),
// built by the GPU machine's g++ as a plain shared library, called through ctypes.
#include <regex>
#include <string>
extern "C" int probe(const char *text) {
  std::regex re("(cpu|cuda|xpu|mps)(:([0-9]+))?");
  std::smatch sm;
  std::string s(text);
  return std::regex_match(s, sm, re) ? 1 : 0;
}
