// The results of mapping searches kept on disk, so that checking a script
// whose mapping is declared with `search { }` (every `ipu check`, `plan`,
// `estimate` and `run`) does not search again while nothing the search
// depends on changed: 20 s for a 175B-parameter model on 256 IPUs, a few ms
// to read back.
//
// The key is a SHA-256 (runtime/ir/sha256.h) of everything a search reads,
// written out exactly (numbers as hexadecimal floating point): this build of
// `ipu` (its ELF build ID, so a change of the search, the planner or the cost
// model never reads an older result), the options (objective, IPUs,
// headroom, fixed settings), and the phase as the search sees it: its batch,
// precision, optimizer, learning rate, dataset, steps, the declared mapping
// (settings, placement) and its pod, machine, chip and calibration, and the
// model's costed layers at every micro batch the search may try (it costs
// them again for each: a model's layers may depend on the micro batch in any
// way). Positions in the source are not part of it: moving a declaration, or
// editing a comment or another training, keeps the result.
//
// A file holds its key with the result; a file that cannot be read, parsed,
// or does not hold the key it is named after is ignored and written again.
// Files are written whole under a temporary name, then renamed
// (runtime/files/safe_write.h), so a reader never sees half of one.
// Where: $XDG_CACHE_HOME/ipu/search, else ~/.cache/ipu/search; IPU_NO_CACHE=1
// turns it off (docs/search.md, "Cached results").
#pragma once

#include <optional>
#include <string>

#include "interpreter/base/source.h"
#include "interpreter/check/evaluator.h"
#include "interpreter/check/program.h"
#include "interpreter/search/search.h"
#include "runtime/ir/json.h"

namespace ipu::search {

// The directory results are kept in, from the environment as described
// above; none when caching is off or there is no home directory.
std::optional<std::string> cacheDirectoryFromEnvironment();

// The key of searching `phase` with `options` (64 hex digits). None when the
// search depends on what the key cannot hold: a Lua placement (hooks), or a
// binary whose build cannot be identified.
std::optional<std::string> resultKey(const check::PhaseSpec& phase, check::Evaluator& evaluator, const base::SourceMap& sources,
                                     const Options& options);

// searchPhase, through the cache in `directory` (none: no cache). Only
// results of searches that ran (no `error`) are kept; `cached`, when given,
// says whether the result was read back.
PhaseResult searchPhaseCached(const check::PhaseSpec& phase, check::Evaluator& evaluator, const base::SourceMap& sources,
                              const Options& options, const std::optional<std::string>& directory, bool* cached = nullptr);

// A result as kept in a cache file, every number exactly, and back (none when
// the JSON is not one). For the tests too: a result read back is the result.
ir::Json resultJson(const PhaseResult& result);
std::optional<PhaseResult> resultFromJson(const nlohmann::ordered_json& json);

}  // namespace ipu::search
