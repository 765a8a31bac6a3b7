// Writing the files the tool produces (formatted scripts, calibrations,
// timelines, the run record, checkpoints) without losing what was there:
//
// - the new text is complete on disk before it replaces the old (a failed or
//   interrupted write leaves the old file as it was);
// - what the file is keeps: a symlink is followed and its target written
//   (the link stays a link), a file with several hard links is rewritten in
//   place (they stay one file), the mode, owner and group stay as they were
//   (a 0600 file stays 0600; a file of another user is never taken over);
// - a read-only file, a directory, a FIFO or a device is refused with a
//   message saying so, never written through or replaced.
//
// A new file gets a temporary name beside it, then a rename. An existing
// one is replaced the same way when the temporary copy can be given its
// mode and owner; otherwise (a hard link, another owner, a directory we may
// not create files in) the text is written in place from a copy kept in
// memory, and on a failed write the old bytes are put back.
#pragma once

#include <string>

namespace ipu::files {

// False (with `error` a sentence naming the file and what to do) when the
// file could not be written; the file is then as it was.
bool writeFileSafely(const std::string& path, const std::string& text, std::string& error);

}  // namespace ipu::files
