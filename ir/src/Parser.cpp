// Reading the text form back into a graph, with line:column diagnostics.
#include "weft/ir/TextFormat.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

namespace weft::ir {
namespace {

class Parser {
public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<Graph> parse() {
    if (!keyword("graph") || !expect('@')) return error();
    std::string gname = identifier();
    if (gname.empty()) return fail("expected a graph name after '@'");
    Graph g(gname);
    if (!expect('(') || !inputs(g, false) || !expect(')')) return error();
    if (peekWord("state") &&
        (!keyword("state") || !expect('(') || !inputs(g, true) || !expect(')')))
      return error();
    if (!expect('{')) return error();
    while (!peekWord("return"))
      if (!node(g)) return error();
    if (!keyword("return") || !expect('(') || !outputs(g) || !expect(')')) return error();
    if (peekWord("updates") && (!keyword("updates") || !expect('(') || !updates(g) || !expect(')')))
      return error();
    if (!expect('}')) return error();
    skipSpace();
    if (pos_ != text_.size()) return fail("unexpected text after the graph");
    return g;
  }

private:
  // ---- lexing ----
  void skipSpace() {
    while (pos_ < text_.size()) {
      if (std::isspace(static_cast<unsigned char>(text_[pos_]))) {
        advance();
      } else if (text_.substr(pos_, 2) == "//") { // comments run to the end of the line
        while (pos_ < text_.size() && text_[pos_] != '\n')
          advance();
      } else {
        break;
      }
    }
  }
  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
  bool peek(char c) {
    skipSpace();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  bool expect(char c) {
    if (peek(c)) {
      advance();
      return true;
    }
    return setError(std::string("expected '") + c + "'");
  }
  static bool identChar(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  }
  std::string identifier() {
    skipSpace();
    size_t start = pos_;
    while (pos_ < text_.size() && identChar(text_[pos_]))
      advance();
    return std::string(text_.substr(start, pos_ - start));
  }
  bool peekWord(std::string_view w) {
    skipSpace();
    return text_.substr(pos_, w.size()) == w &&
           (pos_ + w.size() == text_.size() || !identChar(text_[pos_ + w.size()]));
  }
  bool keyword(std::string_view w) {
    if (peekWord(w)) {
      for (size_t i = 0; i < w.size(); ++i)
        advance();
      return true;
    }
    return setError("expected '" + std::string(w) + "'");
  }
  std::optional<int64_t> integer() {
    skipSpace();
    size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') advance();
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_])))
      advance();
    int64_t v = 0;
    auto [p, ec] = std::from_chars(text_.data() + start, text_.data() + pos_, v);
    if (ec != std::errc() || p != text_.data() + pos_ || pos_ == start) {
      setError("expected an integer");
      return std::nullopt;
    }
    return v;
  }
  std::optional<std::string> stringLiteral() {
    if (!expect('"')) return std::nullopt;
    std::string s;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) advance();
      s += text_[pos_];
      advance();
    }
    if (!expect('"')) return std::nullopt;
    return s;
  }

  // ---- grammar ----
  std::optional<TensorType> type() {
    skipSpace();
    std::string word;
    while (pos_ < text_.size() && std::isalnum(static_cast<unsigned char>(text_[pos_])))
      word += text_[pos_], advance();
    TensorType t;
    if (!dtypeFromName(word, t.dtype)) {
      setError("unknown dtype '" + word + "'");
      return std::nullopt;
    }
    if (!expect('[')) return std::nullopt;
    while (!peek(']')) {
      auto d = integer();
      if (!d) return std::nullopt;
      if (*d < 0) {
        setError("negative dimension in a type");
        return std::nullopt;
      }
      t.shape.push_back(*d);
      if (!peek(']') && !expect(',')) return std::nullopt;
    }
    advance();
    if (!byteSize(t.shape, t.dtype)) {
      setError("type " + typeString(t) + " has more elements than fit in memory");
      return std::nullopt;
    }
    return t;
  }
  static bool dtypeFromName(std::string_view n, DType& out) {
    for (int i = 0; i < kNumDTypes; ++i)
      if (dtypeName(static_cast<DType>(i)) == n) {
        out = static_cast<DType>(i);
        return true;
      }
    return false;
  }

  /// A %name: returns the text after '%'.
  std::optional<std::string> valueName() {
    if (!expect('%')) return std::nullopt;
    std::string n = identifier();
    if (n.empty()) {
      setError("expected a value name after '%'");
      return std::nullopt;
    }
    return n;
  }
  std::optional<ValueId> use() {
    size_t l = line_, c = col_;
    auto n = valueName();
    if (!n) return std::nullopt;
    auto it = names_.find(*n);
    if (it == names_.end()) {
      setErrorAt(l, c, "use of undefined value '%" + *n + "'");
      return std::nullopt;
    }
    return it->second;
  }
  bool define(const std::string& n, ValueId v, size_t l, size_t c) {
    if (!names_.emplace(n, v).second) return setErrorAt(l, c, "redefinition of '%" + n + "'");
    return true;
  }

  bool inputs(Graph& g, bool state) {
    while (!peek(')')) {
      skipSpace();
      size_t l = line_, c = col_;
      auto n = valueName();
      if (!n || !expect(':')) return false;
      auto t = type();
      if (!t) return false;
      ValueId v = state ? g.addState(*t, *n) : g.addArgument(*t, *n);
      if (!define(*n, v, l, c)) return false;
      if (!peek(')') && !expect(',')) return false;
    }
    return true;
  }

  std::optional<AttrValue> attrValue() {
    skipSpace();
    if (peek('[')) {
      advance();
      std::vector<int64_t> list;
      while (!peek(']')) {
        auto v = integer();
        if (!v) return std::nullopt;
        list.push_back(*v);
        if (!peek(']') && !expect(',')) return std::nullopt;
      }
      advance();
      return AttrValue(list);
    }
    if (peek('"')) {
      auto s = stringLiteral();
      return s ? std::optional<AttrValue>(AttrValue(*s)) : std::nullopt;
    }
    size_t start = pos_;
    while (pos_ < text_.size() &&
           (identChar(text_[pos_]) || text_[pos_] == '-' || text_[pos_] == '+'))
      advance();
    std::string word(text_.substr(start, pos_ - start));
    if (word == "true" || word == "false") return AttrValue(word == "true");
    DType t;
    if (dtypeFromName(word, t)) return AttrValue(t);
    if (word == "inf" || word == "-inf" || word == "nan")
      return AttrValue(word == "nan" ? std::nan("") : word == "inf" ? INFINITY : -INFINITY);
    bool isFloat = word.find_first_of(".e") != std::string::npos;
    if (isFloat) {
      double d = 0;
      auto [p, ec] = std::from_chars(word.data(), word.data() + word.size(), d);
      if (ec == std::errc() && p == word.data() + word.size()) return AttrValue(d);
    } else {
      int64_t i = 0;
      auto [p, ec] = std::from_chars(word.data(), word.data() + word.size(), i);
      if (ec == std::errc() && p == word.data() + word.size() && !word.empty()) return AttrValue(i);
    }
    setError("invalid attribute value '" + word + "'");
    return std::nullopt;
  }

  bool node(Graph& g) {
    skipSpace();
    size_t l = line_, c = col_;
    auto result = valueName();
    if (!result || !expect('=')) return false;
    skipSpace();
    size_t ol = line_, oc = col_;
    std::string opname = identifier();
    auto op = opFromName(opname);
    if (!op) return setErrorAt(ol, oc, "unknown op '" + opname + "'");
    if (!expect('(')) return false;
    std::vector<ValueId> operands;
    while (!peek(')')) {
      auto v = use();
      if (!v) return false;
      operands.push_back(*v);
      if (!peek(')') && !expect(',')) return false;
    }
    advance();
    Attrs attrs;
    if (peek('{')) {
      advance();
      while (!peek('}')) {
        std::string key = identifier();
        if (key.empty()) return setError("expected an attribute name");
        if (attrs.has(key)) return setError("attribute '" + key + "' given twice");
        if (!expect('=')) return false;
        auto v = attrValue();
        if (!v) return false;
        attrs.set(key, *v);
        if (!peek('}') && !expect(',')) return false;
      }
      advance();
    }
    if (!expect(':')) return false;
    auto t = type();
    if (!t) return false;
    Location loc;
    if (peekWord("loc")) {
      keyword("loc");
      auto file = expect('(') ? stringLiteral() : std::nullopt;
      if (!file || !expect(':')) return false;
      size_t ll = line_, lc = col_;
      auto ln = integer();
      if (!ln) return false;
      if (*ln < 0 || *ln > std::numeric_limits<int>::max())
        return setErrorAt(ll, lc, "line number " + std::to_string(*ln) + " in loc is out of range");
      if (!expect(')')) return false;
      loc = Location{*file, static_cast<int>(*ln)};
    }
    ValueId v = g.addNode(*op, std::move(operands), std::move(attrs), *t, loc);
    return define(*result, v, l, c);
  }

  bool outputs(Graph& g) {
    while (!peek(')')) {
      auto v = use();
      if (!v) return false;
      g.addOutput(*v);
      if (!peek(')') && !expect(',')) return false;
    }
    return true;
  }

  bool updates(Graph& g) {
    while (!peek(')')) {
      auto s = use();
      if (!s || !expect('=')) return false;
      auto v = use();
      if (!v) return false;
      g.addStateUpdate(*s, *v);
      if (!peek(')') && !expect(',')) return false;
    }
    return true;
  }

  // ---- errors ----
  bool setError(const std::string& msg) { return setErrorAt(line_, col_, msg); }
  bool setErrorAt(size_t l, size_t c, const std::string& msg) {
    if (!error_) error_ = diag(ErrorKind::Value, l, ":", c, ": ", msg);
    return false;
  }
  Diagnostic error() const {
    return error_ ? *error_ : diag(ErrorKind::Value, line_, ":", col_, ": syntax error");
  }
  Diagnostic fail(const std::string& msg) {
    setError(msg);
    return error();
  }

  std::string_view text_;
  size_t pos_ = 0, line_ = 1, col_ = 1;
  std::map<std::string, ValueId> names_;
  std::optional<Diagnostic> error_;
};

} // namespace

Result<Graph> parseGraph(std::string_view text) {
  return Parser(text).parse();
}

} // namespace weft::ir
