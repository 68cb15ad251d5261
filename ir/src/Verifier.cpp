// The graph verifier.
#include "weft/ir/Verifier.h"

#include "weft/ir/ShapeInference.h"

#include <set>

namespace weft::ir {
namespace {

std::string where(const Node& n, size_t index) {
  std::string s;
  if (n.loc.known()) s = n.loc.text() + ": ";
  return s + "%" + std::to_string(index) + " = " + std::string(opName(n.op)) + ": ";
}

/// "file:line: " of the node that computes `v`, when it has a location.
std::string sourceOf(const Graph& g, ValueId v) {
  if (v < 0 || static_cast<size_t>(v) >= g.values().size()) return "";
  int32_t producer = g.value(v).producer;
  if (producer < 0 || static_cast<size_t>(producer) >= g.nodes().size()) return "";
  const Location& loc = g.nodes()[static_cast<size_t>(producer)].loc;
  return loc.known() ? loc.text() + ": " : "";
}

} // namespace

std::vector<Diagnostic> verify(const Graph& g) {
  std::vector<Diagnostic> out;
  auto valid = [&](ValueId v) {
    return v >= 0 && static_cast<size_t>(v) < g.values().size() && g.value(v).producer >= -1;
  };
  std::vector<bool> defined(g.values().size(), false);
  for (ValueId v : g.arguments())
    defined[static_cast<size_t>(v)] = true;
  for (ValueId v : g.state())
    defined[static_cast<size_t>(v)] = true;

  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    std::vector<TensorType> types;
    bool operandsOk = true;
    for (size_t k = 0; k < n.operands.size(); ++k) {
      ValueId v = n.operands[k];
      if (!valid(v) || !defined[static_cast<size_t>(v)]) {
        out.push_back(
            diag(ErrorKind::Value, where(n, i), "operand ", k, " is used before it is defined"));
        operandsOk = false;
        continue;
      }
      types.push_back(g.type(v));
    }
    if (operandsOk) {
      auto inferred = inferType(n.op, types, n.attrs);
      if (!inferred)
        out.push_back(diag(inferred.diagnostic().kind, where(n, i), inferred.diagnostic().message));
      else if (!(inferred.value() == g.type(n.result)))
        out.push_back(diag(ErrorKind::Shape, where(n, i), "result type is ",
                           typeString(g.type(n.result)), " but the op produces ",
                           typeString(inferred.value())));
    }
    if (valid(n.result)) defined[static_cast<size_t>(n.result)] = true;
  }
  for (size_t k = 0; k < g.outputs().size(); ++k)
    if (!valid(g.outputs()[k]) || !defined[static_cast<size_t>(g.outputs()[k])])
      out.push_back(diag(ErrorKind::Value, sourceOf(g, g.outputs()[k]), "return: output ", k,
                         " is not a defined value"));
  std::set<ValueId> updated;
  std::set<ValueId> state(g.state().begin(), g.state().end());
  for (const StateUpdate& u : g.stateUpdates()) {
    if (!state.count(u.state)) {
      out.push_back(diag(ErrorKind::Value, "updates: only state inputs can be updated"));
      continue;
    }
    const std::string& name = g.value(u.state).name;
    if (!updated.insert(u.state).second)
      out.push_back(diag(ErrorKind::Value, "updates: %", name, " is updated twice"));
    if (!valid(u.newValue) || !defined[static_cast<size_t>(u.newValue)])
      out.push_back(diag(ErrorKind::Value, sourceOf(g, u.newValue), "updates: the new value of %",
                         name, " is not defined"));
    else if (!(g.type(u.newValue) == g.type(u.state)))
      out.push_back(diag(ErrorKind::Shape, sourceOf(g, u.newValue), "updates: %", name,
                         " has type ", typeString(g.type(u.state)), " but its new value has type ",
                         typeString(g.type(u.newValue))));
  }
  return out;
}

} // namespace weft::ir
