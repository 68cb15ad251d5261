// The graph's stable text form: a printer, and a parser that reads it back.
#pragma once

#include "weft/ir/Graph.h"

#include <string>
#include <string_view>
#include <vector>

namespace weft::ir {

/// The text form of `g`. Values are renumbered in order, so print(parse(print(g))) == print(g).
std::string printGraph(const Graph& g);
/// The name printGraph gives each value, without the "%" (inputs keep theirs, results are
/// numbered).
std::vector<std::string> valueNames(const Graph& g);

/// The graph `text` spells, or a diagnostic "line:col: message" for the first problem. Types are
/// taken as written; run verify() to check them against the ops.
Result<Graph> parseGraph(std::string_view text);

/// An attribute value as the text form spells it ("[1, 2]", "2.5", "float32", "true").
std::string printAttr(const AttrValue& v);

} // namespace weft::ir
