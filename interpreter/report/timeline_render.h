// Drawing a step's timeline (runtime/cost/timeline.h): ASCII for the
// terminal, SVG for a file. A step can have thousands of pipeline cycles, so
// both draw the fill, a few steady-state cycles, a break, the drain, and the
// end of the step, with the break labelled by the cycles it hides.
#pragma once

#include <ostream>
#include <string>

#include "interpreter/base/terminal.h"
#include "runtime/cost/timeline.h"

namespace ipu::report {

void drawTimelineAscii(std::ostream& os, const cost::Timeline& t, int shard, const base::Painter& painter);
std::string drawTimelineSvg(const cost::Timeline& t, const std::string& title, int shard);

}  // namespace ipu::report
