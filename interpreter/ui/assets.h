// The dashboard's own pages, scripts and style (interpreter/ui/pages/),
// embedded in the binary at build time (cmake/EmbedFiles.cmake), so `ipu ui`
// needs no file beside it and the page no network.
#pragma once

#include <string>

namespace ipu::ui::assets {

const std::string& runsPage();     // pages/runs.html: the runs table
const std::string& sweepsPage();   // pages/sweeps.html: the list of sweeps
const std::string& style();        // pages/ui.css
const std::string& runsScript();   // pages/runs.js
const std::string& sweepsScript(); // pages/sweeps.js
const std::string& detailsScript();    // pages/details.js: a run's or a comparison's extra section
const std::string& errorsScript();  // pages/errors.js: counts a page's errors (first on every page)
const std::string& commonScript();  // pages/common.js: what the scripts share
const std::string& sweepLiveScript();  // pages/sweep_live.js: reloads a sweep's page when it changed

}  // namespace ipu::ui::assets
