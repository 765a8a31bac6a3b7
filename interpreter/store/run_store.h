// The run store: where every `ipu run` and `ipu estimate` is recorded, so that
// runs can be found, filtered and compared months later (docs/tracking.md).
//
// One interface, two real databases behind it: SQLite (the default, a file
// beside the runs, no set-up) and PostgreSQL (one store shared by the hosts of
// a team). Both keep the same tables (see sql_store.cpp) and pass the same
// test suite (tests/store/store_test.cpp). The interface speaks in whole
// records and batches, never in SQL, so that callers (the recorder of a run,
// `ipu runs`, `ipu report`) cannot depend on one backend's dialect.
//
// Store failures (a locked file past the busy timeout, a server gone away, a
// store written by a newer `ipu`) are reported as `StoreError`: they are I/O
// failures of a leaf library, caught and turned into messages by the commands.
#pragma once

#include <cmath>
#include <limits>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ipu::store {

// Bumped whenever the tables change; a store with a higher version is refused,
// never modified (an older `ipu` cannot know what a newer one relies on).
constexpr int kSchemaVersion = 4;

class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// The store was busy (SQLite's "database is locked" that its busy handler
// did not wait out, as when two processes set up a new store at once): the
// same step may be tried again.
class StoreBusy : public StoreError {
 public:
  using StoreError::StoreError;
};

// The run written to is no longer in the store (deleted under its process):
// writing again will not help.
class RunGone : public StoreError {
 public:
  using StoreError::StoreError;
};

enum class RunKind { Run, Estimate };
enum class RunStatus { Running, Finished, Failed, Stopped, Cancelled, Killed };

const char* name(RunKind k);
const char* name(RunStatus s);
std::optional<RunKind> parseRunKind(const std::string& text);
std::optional<RunStatus> parseRunStatus(const std::string& text);

constexpr double kNoTime = std::numeric_limits<double>::quiet_NaN();
// Seconds since the Unix epoch, with sub-second precision.
double nowSeconds();

struct MetricPoint {
  std::string key;
  long long step = 0;
  double value = 0;  // NaN for a non-finite value (a diverged loss): kept, and left out of summaries
  double time = 0;   // seconds since the epoch
};

struct MetricSummary {
  double last = kNoTime, min = kNoTime, max = kNoTime;
  long long lastStep = 0;
  long long count = 0;  // points recorded, finite or not
};

// A file a run wrote (docs/tracking.md, "Artifacts"). A checkpoint's `path`
// is relative to `runDirectory` (the run directory's absolute location on
// `host`); records made before schema version 4 have an absolute `path` and
// no run directory. A run directory's `path` is its absolute location.
struct Artifact {
  Artifact() = default;
  Artifact(std::string kind_, std::string path_) : kind(std::move(kind_)), path(std::move(path_)) {}
  std::string kind;  // "run_directory", "checkpoint"
  std::string path;
  std::string phase;          // a checkpoint's phase ("" unknown)
  long long step = -1;        // a checkpoint's global step (from 1; -1 unknown)
  long long size = -1;        // bytes (-1 unknown)
  std::string sha256;         // 64 hex digits ("" unknown)
  std::string host;           // where it was written
  std::string runDirectory;   // a checkpoint's run directory (absolute, on `host`)
  bool stored = false;        // its bytes are kept in the store (`--artifacts store`)
  double createdAt = kNoTime;
};

// Where a run's checkpoint bytes are kept (`ipu run --artifacts`,
// docs/tracking.md "Artifacts"): in its run directory only, or in the
// store as well, so that another host can fetch them.
enum class ArtifactStorage { Files, Store };
const char* name(ArtifactStorage s);
std::optional<ArtifactStorage> parseArtifactStorage(const std::string& text);
// The default for a store: Store for PostgreSQL (shared between hosts that
// need not share a file system), Files for SQLite (a file beside the run
// directories, on the same disk: a copy there would only double them).
ArtifactStorage defaultArtifactStorage(const std::string& location);

// Where an artifact's file is on the host that wrote it: `runDirectory` /
// `path`, or `path` when it is absolute.
std::string artifactFile(const Artifact& a);

// The bytes of an artifact kept in the store did not read back as recorded
// (their SHA-256 differs): damaged, never to be used.
class ArtifactDamaged : public StoreError {
 public:
  using StoreError::StoreError;
};

// What a run is when it starts.
struct NewRun {
  RunKind kind = RunKind::Run;
  std::string training;  // the script's `run` name
  std::string name;      // what it is called ("": "<training>-<id>"); need not be unique
  std::string script;    // the script text as it was run
  std::string planHash;  // equal for an estimate and a run of the same plan
  std::map<std::string, std::string> parameters;  // resolved values, flattened ("mapping.replicas" -> "4")
  std::string host;
  long long pid = 0;
  double startedAt = 0;
};

// What a run directory holds for its record (`ipu runs import`): every
// point, the checkpoints, and how the run ended.
struct RunContents {
  std::vector<MetricPoint> points;
  std::vector<Artifact> artifacts;
  RunStatus status = RunStatus::Killed;
  std::string reason;
  double endedAt = kNoTime;
};

struct RunRecord {
  long long id = 0;
  std::string name;  // readable: given (`ipu run --name`), else "<training>-<id>"
  RunKind kind = RunKind::Run;
  std::string training;
  RunStatus status = RunStatus::Running;
  std::string stopReason;
  double startedAt = kNoTime, endedAt = kNoTime, heartbeatAt = kNoTime;
  std::string host;
  long long pid = 0;
  std::string planHash;
  std::string note;
  std::map<std::string, std::string> parameters;
  std::map<std::string, MetricSummary> metrics;
  std::vector<std::string> tags;
  std::vector<Artifact> artifacts;  // filled by run(), not by listRuns()
  std::string script;               // filled by run(), not by listRuns()
};

class RunStore {
 public:
  virtual ~RunStore() = default;

  // Where the store is, as the user named it (for messages).
  virtual const std::string& location() const = 0;

  // A new run, status running, heartbeat now. Returns its id.
  virtual long long createRun(const NewRun& run) = 0;
  // Metric points, in one short transaction that also updates the summaries
  // and the heartbeat. Steps of a key need not arrive in order.
  virtual void appendMetrics(long long run, const std::vector<MetricPoint>& points) = 0;
  // The same points again, after an append whose outcome is not known (the
  // connection was lost while committing): points already recorded for a
  // key of the batch within the steps the batch has for that key are
  // replaced, and that key's summary recomputed, so a batch the store did
  // commit is not recorded twice. A record `gc` marked killed while its
  // process could not reach the store is running again. One transaction.
  virtual void replaceMetrics(long long run, const std::vector<MetricPoint>& points) = 0;
  virtual void heartbeat(long long run, double now) = 0;
  virtual void finishRun(long long run, RunStatus status, const std::string& reason, double endedAt) = 0;
  // A resumed run: running again, by the process `pid` on `host` (whose
  // liveness gc and listing check from now on), points from `fromStep` on
  // dropped (they are about to be recorded again), summaries recomputed.
  virtual void reopenRun(long long run, long long fromStep, const std::string& host, long long pid) = 0;
  // Records an artifact (replacing the record of the same run and path).
  // With `contentFile`, its bytes are kept in the store too, read from that
  // file in chunks in the same transaction; their SHA-256 must be
  // `artifact.sha256` (the file changed since it was hashed: StoreError).
  virtual void addArtifact(long long run, const Artifact& artifact, const std::string& contentFile = "") = 0;
  // The bytes of an artifact kept in the store, in chunks to `sink`, checked
  // against its recorded SHA-256 as they go: ArtifactDamaged when they
  // differ (after the last chunk: the sink must not keep them unless this
  // returns), StoreError when there are none.
  virtual void readArtifact(long long run, const std::string& path,
                            const std::function<void(const char*, std::size_t)>& sink) = 0;
  // Removes artifacts of a run (records and bytes kept in the store), in one
  // transaction. Returns how many there were.
  virtual std::size_t removeArtifacts(long long run, const std::vector<std::string>& paths) = 0;
  // A record made whole from its run directory (`ipu runs import` of a run
  // the store recorded only in part): its points become the directory's, its
  // summaries are recomputed, its checkpoints added, and it ends as the
  // directory says. One transaction.
  virtual void completeRun(long long run, const RunContents& contents) = 0;
  // Throws StoreError when a run could not be recorded: the tables a run
  // writes cannot be written (a read-only file, a user with the right to
  // read only, a write lock held past the busy timeout). Writes nothing: the
  // write transaction it opens is rolled back.
  virtual void checkWritable() = 0;

  // The run whose artifact of kind "run_directory" is `path`, if any.
  virtual std::optional<long long> findByRunDirectory(const std::string& path) = 0;
  // A new run recorded with its run directory (an artifact of kind
  // `run_directory` at `directory`) and everything it holds, whole, in one
  // transaction with the check that no run has that directory yet: nothing
  // (and no new run) when one has. Processes importing one directory at once
  // record it once, and none sees it recorded in part.
  virtual std::optional<long long> createRunForDirectory(const NewRun& run, const std::string& directory,
                                                         const RunContents& contents) = 0;
  // Every run, newest first, with parameters, metric summaries and tags.
  virtual std::vector<RunRecord> listRuns() = 0;
  // One run with everything (script and artifacts too).
  virtual std::optional<RunRecord> run(long long id) = 0;
  // Points of a run, by key then step ("" for every key).
  virtual std::vector<MetricPoint> metricHistory(long long run, const std::string& key = "") = 0;
  // The same, at most about `maxPoints` per key: a longer series is averaged
  // over equal ranges of steps, in the database (so a report of long runs
  // does not move every point). A range's time is its latest.
  virtual std::vector<MetricPoint> metricCurves(long long run, std::size_t maxPoints) = 0;

  virtual void addTags(long long run, const std::vector<std::string>& tags) = 0;
  virtual void removeTags(long long run, const std::vector<std::string>& tags) = 0;
  virtual void setNote(long long run, const std::string& note) = 0;
  virtual bool deleteRun(long long run) = 0;
  // Runs still `running` whose heartbeat is older than `graceSeconds`
  // become `killed` (their process died without saying so), except those
  // `alive` says still have their process (its host and pid; null: none).
  // Returns their ids.
  using ProcessAlive = std::function<bool(const std::string& host, long long pid)>;
  virtual std::vector<long long> markStale(double now, double graceSeconds, const ProcessAlive& alive) = 0;
};

// What is wrong with a tag ("" when nothing): a tag is one word, without
// commas, spaces, tabs or newlines, so that lists of tags read it.
std::string tagProblem(const std::string& tag);
// What is wrong with a run's name ("" when nothing): a line of printable
// text, at most 200 bytes, not a whole number (that reads as a run's id).
std::string runNameProblem(const std::string& name);

// A run by its id ("12") or its name ("tiny_trial-12"), with everything (as
// RunStore::run); of runs given the same name, the newest. `all`, when given, is the store's listRuns() (to look a name
// up in without listing again).
std::optional<RunRecord> findRun(RunStore& store, const std::string& idOrName,
                                 const std::vector<RunRecord>* all = nullptr);

// How to open a store.
enum class OpenMode {
  Create,    // create the store (and, for SQLite, its directory) if missing
  Existing,  // fail if there is no store yet
};

// `location` is a file path (SQLite) or a `postgresql://` / `postgres://`
// URI. Creates or migrates the schema in one transaction; refuses a store
// of a newer schema version without writing to it.
std::unique_ptr<RunStore> openStore(const std::string& location, OpenMode mode);

bool isPostgresLocation(const std::string& location);

}  // namespace ipu::store
