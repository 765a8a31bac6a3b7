// `ipu search --write` and `--apply`: the user's script with the mappings the
// search found put in, everything else kept byte for byte (comments, models,
// trainings, other mappings, blank lines). The script is not printed again:
// its root file is parsed, and a few edits on the source ranges of that tree
// are applied to its text:
//
// - each found mapping is declared as a new mapping, `NAME_searched`, right
//   after the mapping it replaces (before the training when that one is not
//   in the script), its settings written through the mapping value and the
//   table of mapping fields (runtime/ir/mapping_fields.h: settingLines), its
//   pipeline as explicit stages in data-flow order;
// - each searched phase refers to it (`mapping:` replaced in the phase's
//   block, or added to it) and gets the micro batch and the gradient
//   accumulation of the answer, in the fields the phase's batch was derived
//   from, so that its global batch is the same;
// - the original mapping stays as it was: other phases and trainings may use
//   it, and it is the one to compare with. A mapping declared with
//   `search { }` stays too; the phases written no longer use it, so checking
//   the written script does not search for them again.
//
// A phase whose own mapping is the best (split `declared`, or the same
// mapping under another split) keeps it, so writing twice changes nothing. The
// caller checks the result as a script before writing it (search_command.cpp).
#pragma once

#include <string>
#include <vector>

#include "interpreter/base/source.h"
#include "interpreter/check/program.h"
#include "interpreter/search/search.h"

namespace ipu::search {

// One searched phase and the mapping to write for it.
struct FoundMapping {
  std::string run;                          // the training's name
  const check::PhaseSpec* phase = nullptr;  // as searched: the candidate's settings are read through it (mappingOf)
  Candidate candidate;                      // the best that fits
  // The same phase as the script writes it (of the file given to
  // putFoundMappings): its span, mapping and batch as written. A check gives
  // a phase whose mapping is declared with `search { }` the block's answer,
  // batch included, so it differs from `phase` there. Null: `phase` is.
  const check::PhaseSpec* written = nullptr;
};

// What the edited script says for one phase, for the caller to verify.
struct WrittenPhase {
  std::string run, phase;
  std::string mapping;  // the mapping the phase uses in the edited script
  long long microBatch = 0, gradientAccumulation = 0, globalBatch = 0;
  const Candidate* candidate = nullptr;  // the FoundMapping's
};

struct ScriptEdit {
  bool ok = false;
  std::string text;                   // the root file with the edits applied
  std::vector<std::string> changes;   // one sentence per change, for the terminal
  std::vector<WrittenPhase> phases;   // in the order found
  std::string problem;                // when !ok: why nothing can be written
};

// The text of `root` (a file of `sources`, checked as `program`) with the
// found mappings put in. Not ok, with a sentence saying why, when a phase
// cannot be edited in this file (declared in an imported module, or one
// phase block shared by runs the search gives different answers).
ScriptEdit putFoundMappings(const base::SourceMap& sources, base::FileId root, const check::CheckedProgram& program,
                            const std::vector<FoundMapping>& found);

}  // namespace ipu::search
