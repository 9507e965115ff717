#include "ir/loop_nest.h"

#include <cctype>

#include "base/error.h"

namespace mpk::ir {
namespace {

class Printer {
 public:
  explicit Printer(const LoopNest& n) : n_(n) {}

  void block(const Block& b, int depth, std::string& out) const {
    for (const Stmt& s : b) stmt(s, depth, out);
  }

 private:
  void stmt(const Stmt& s, int depth, std::string& out) const {
    const std::string pad(size_t(depth) * 2, ' ');
    switch (s.kind) {
      case Stmt::Loop: {
        const std::string e = to_c(s.expr, CType::Int), v = s.var;
        if (s.loop == LoopKind::Threads) {
          out += pad + "for (int " + v + " = " + n_.thread_index + "; " + v + " < " + e + "; " + v + " += " + n_.threads +
                 ") {\n";
        } else if (s.kept) {
          out += pad + "int " + v + " = " + to_c(s.start, CType::Int) + ";\n";
          out += pad + "for (; " + v + " < " + e + "; " + v + " += " + to_c(s.step, CType::Int) + ") {\n";
        } else {
          if (s.loop == LoopKind::Unrolled) out += pad + "#pragma unroll\n";
          out += pad + "for (int " + v + " = " + to_c(s.start, CType::Int) + "; " + v + " < " + e + "; " + v + " += " + to_c(s.step, CType::Int) +
                 ") {\n";
        }
        block(s.body, depth + 1, out);
        out += pad + "}\n";
        return;
      }
      case Stmt::Let: out += pad + "const int " + s.var + " = " + to_c(s.expr, CType::Int) + ";\n"; return;
      case Stmt::If:
        out += pad + "if (" + to_c(s.expr, CType::Int) + " < " + to_c(s.step, CType::Int) + ") {\n";
        block(s.body, depth + 1, out);
        out += pad + "}\n";
        return;
      case Stmt::Code: out += pad + substituted(s.code) + "\n"; return;
      case Stmt::Bind: out += pad + "const int " + s.var + " = " + param(s.var).c + ";\n"; return;
      case Stmt::Thread: out += pad + "const int " + s.var + " = " + s.code + ";\n"; return;
    }
  }

  const Param& param(const std::string& name) const {
    for (const Param& p : n_.params)
      if (p.name == name) return p;
    MPK_THROW(InvalidArgument) << "loop nest: bind of '" << name << "', not a parameter";
  }

  // The code with each {name} replaced by its access's element.
  std::string substituted(const std::string& code) const {
    std::string out;
    for (size_t i = 0; i < code.size(); ++i) {
      if (code[i] != '{') {
        out += code[i];
        continue;
      }
      const size_t end = code.find('}', i);
      const std::string name = code.substr(i + 1, end == std::string::npos ? 0 : end - i - 1);
      const Access* a = nullptr;
      for (const Access& x : n_.accesses)
        if (x.name == name) a = &x;
      if (!a) {  // a brace of the C itself
        out += code[i];
        continue;
      }
      std::string base = a->base;
      const size_t at = base.find('@');
      if (at != std::string::npos) base.replace(at, 1, to_c(a->array, CType::Int));
      const bool placed = !(a->place.op() == IndexOp::Const && a->place.node().value == 0);
      const IndexExpr at_place =
          placed ? substitute(a->place, {{"array", a->array}, {"index", a->index}}) : a->index;
      out += base + "[" + to_c(at_place, a->type) + "]";
      i = end;
    }
    return out;
  }

  const LoopNest& n_;
};

}  // namespace

bool binds(const Block& b, const std::string& param) {
  for (const Stmt& s : b)
    if ((s.kind == Stmt::Bind && s.var == param) || binds(s.body, param)) return true;
  return false;
}

bool names(const std::string& text, const std::string& name) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1))
    if ((at == 0 || !ident(text[at - 1])) && (at + name.size() == text.size() || !ident(text[at + name.size()])))
      return true;
  return false;
}

std::string print(const LoopNest& nest) {
  std::string body;
  Printer(nest).block(nest.body, 1, body);
  std::string out = nest.signature + " {\n";
  for (const Param& p : nest.params)
    if (!binds(nest.body, p.name) && names(body, p.name)) out += "  const int " + p.name + " = " + p.c + ";\n";
  return out + body + "}\n";
}

}  // namespace mpk::ir
