// Printing graphs in the text form.
#include "weft/ir/TextFormat.h"

#include <charconv>
#include <cmath>
#include <set>
#include <sstream>

namespace weft::ir {
namespace {

std::string printDouble(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] =
      std::to_chars(buf, buf + sizeof(buf), d); // shortest text that reads back exactly
  std::string s(buf, end);
  if (s.find_first_of(".en") == std::string::npos)
    s += ".0"; // keep floats distinguishable from integers
  return s;
}

std::string printType(const TensorType& t) {
  return typeString(t);
}

void printLoc(std::ostream& os, const Location& loc) {
  if (!loc.known()) return;
  os << " loc(\"";
  for (char c : loc.file)
    os << (c == '"' || c == '\\' ? "\\" : "") << c;
  os << "\":" << loc.line << ")";
}

} // namespace

std::string printAttr(const AttrValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) return printDouble(*d);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const auto* t = std::get_if<DType>(&v)) return std::string(dtypeName(*t));
  if (const auto* s = std::get_if<std::string>(&v)) {
    std::ostringstream os;
    os << '"';
    for (char c : *s)
      os << (c == '"' || c == '\\' ? "\\" : "") << c;
    os << '"';
    return os.str();
  }
  return shapeString(std::get<Shape>(v)); // "[1, 2]", as shapes print
}

std::vector<std::string> valueNames(const Graph& g) {
  std::vector<std::string> names(g.values().size());
  for (ValueId v : g.arguments())
    names[static_cast<size_t>(v)] = g.value(v).name;
  for (ValueId v : g.state())
    names[static_cast<size_t>(v)] = g.value(v).name;
  // Node results are numbered in order, skipping numbers an input is already called ("%4: int64").
  std::set<std::string> taken;
  for (const std::string& n : names)
    if (!n.empty()) taken.insert(n);
  size_t next = 0;
  for (const Node& n : g.nodes()) {
    while (taken.count(std::to_string(next)))
      ++next;
    names[static_cast<size_t>(n.result)] = std::to_string(next++);
  }
  return names;
}

std::string printGraph(const Graph& g) {
  const std::vector<std::string> names = valueNames(g);
  auto name = [&](ValueId v) { // broken ids print visibly, for the verifier's sake
    std::ostringstream n;
    if (v < 0 || static_cast<size_t>(v) >= names.size() || names[static_cast<size_t>(v)].empty())
      n << "%<invalid " << v << ">";
    else
      n << "%" << names[static_cast<size_t>(v)];
    return n.str();
  };

  std::ostringstream os;
  auto printInputs = [&](const std::vector<ValueId>& ids) {
    for (size_t i = 0; i < ids.size(); ++i)
      os << (i ? ", " : "") << name(ids[i]) << ": " << printType(g.type(ids[i]));
  };
  os << "graph @" << g.name() << "(";
  printInputs(g.arguments());
  os << ")";
  if (!g.state().empty()) {
    os << " state(";
    printInputs(g.state());
    os << ")";
  }
  os << " {\n";
  for (const Node& n : g.nodes()) {
    os << "  " << name(n.result) << " = " << opName(n.op) << "(";
    for (size_t i = 0; i < n.operands.size(); ++i)
      os << (i ? ", " : "") << name(n.operands[i]);
    os << ")";
    if (!n.attrs.items().empty()) {
      os << " {";
      for (size_t i = 0; i < n.attrs.items().size(); ++i)
        os << (i ? ", " : "") << n.attrs.items()[i].first << " = "
           << printAttr(n.attrs.items()[i].second);
      os << "}";
    }
    os << " : " << printType(g.type(n.result));
    printLoc(os, n.loc);
    os << "\n";
  }
  // Kernels (after the fuse pass) as comments: the parser skips them, and any change drops them.
  for (size_t k = 0; k < g.kernels().size(); ++k) {
    const FusionGroup& grp = g.kernels()[k];
    auto list = [&](const char* label, const std::vector<ValueId>& ids) {
      os << " " << label << "(";
      for (size_t i = 0; i < ids.size(); ++i)
        os << (i ? ", " : "") << name(ids[i]);
      os << ")";
    };
    auto results = [&](const std::vector<int32_t>& nodes) {
      std::vector<ValueId> r;
      for (int32_t i : nodes)
        r.push_back(i >= 0 && static_cast<size_t>(i) < g.nodes().size()
                        ? g.nodes()[static_cast<size_t>(i)].result
                        : kNoValue);
      return r;
    };
    os << "  // kernel " << k << " " << shapeString(grp.shape);
    if (!grp.parts.empty()) {
      os << " parts(";
      for (size_t i = 0; i < grp.parts.size(); ++i)
        os << (i ? ", " : "") << shapeString(grp.parts[i]);
      os << ")";
    }
    os << ":";
    list("nodes", results(grp.nodes));
    if (!grp.leaves.empty()) list("leaves", results(grp.leaves));
    list("reads", grp.inputs);
    os << " writes(";
    for (size_t i = 0; i < grp.outputs.size(); ++i) {
      os << (i ? ", " : "") << name(grp.outputs[i]);
      int32_t over = i < grp.inPlace.size() ? grp.inPlace[i] : -1;
      if (over >= 0 && static_cast<size_t>(over) < grp.inputs.size())
        os << " over " << name(grp.inputs[static_cast<size_t>(over)]);
    }
    os << ")";
    os << "\n";
  }
  os << "  return(";
  for (size_t i = 0; i < g.outputs().size(); ++i)
    os << (i ? ", " : "") << name(g.outputs()[i]);
  os << ")";
  if (!g.stateUpdates().empty()) {
    os << " updates(";
    for (size_t i = 0; i < g.stateUpdates().size(); ++i)
      os << (i ? ", " : "") << name(g.stateUpdates()[i].state) << " = "
         << name(g.stateUpdates()[i].newValue);
    os << ")";
  }
  os << "\n}\n";
  return os.str();
}

} // namespace weft::ir
