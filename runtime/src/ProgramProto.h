// An Executable as the schema's Program message (proto/weft/artifact.proto) and back: what
// Executable::save() writes and an artifact's manifest holds. Reading validates every index and
// size of the message (IOErrors starting with the caller's context), so that no bytes, however
// damaged or hostile, make a plan that reads or writes outside its buffers.
#pragma once

#include "proto/weft/artifact.pb.h"
#include "weft/runtime/Executable.h"

#include <string>

namespace weft {

void toProto(const Executable& e, proto::Program& out);
/// The executable `p` describes (its code not loaded, its memory planned); `ctx` starts each
/// error ("executable: ", "load_artifact: 'm.weft': program 'forward': ").
Executable fromProto(const proto::Program& p, const std::string& ctx);

} // namespace weft
