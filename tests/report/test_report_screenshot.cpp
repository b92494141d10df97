// The report as a person sees it: two real runs are reported, Debian's headless Chromium
// renders the page to a PNG, and tests/report/png_colors.py (standard library only) checks the
// image is not blank and that each run's colour is drawn as long lines, not only in legends and
// swatches. Skipped only where Chromium cannot start at all (it renders a page of its own
// first); once it can, a report it fails to render fails the test.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "genesis/report/report_charts.hpp"
#include "report/report_fixture.hpp"
#include "support/cli_run.hpp"
#include "support/environment_skip.hpp"

namespace genesis {
namespace {

namespace fs = std::filesystem;
using testing::run_process;

// Renders `html` to `png` at the size the report is designed for; false when Chromium could not
// start (absent, or no screenshot written), with the reason in `why`.
bool screenshot(const fs::path& html, const fs::path& png, const fs::path& profile, std::string& why) {
  // --no-sandbox: Chromium's sandbox refuses to run as root, as tests do in containers.
  const auto r = run_process({"timeout", "120", "chromium", "--headless", "--no-sandbox",
                              "--disable-gpu", "--hide-scrollbars", "--no-first-run",
                              "--user-data-dir=" + profile.string(),
                              "--screenshot=" + png.string(), "--window-size=1200,2000",
                              "file://" + fs::absolute(html).string()});
  if (r.exit_code == 0 && fs::exists(png) && fs::file_size(png) > 0) return true;
  why = "chromium exited " + std::to_string(r.exit_code) + ": " +
        (r.err.size() > 400 ? r.err.substr(r.err.size() - 400) : r.err);
  return false;
}

}  // namespace

TEST_CASE("the report's screenshot shows every run's curves", "[report]") {
  testing::TempDir tmp;
  std::string why;
  const fs::path probe = tmp.path() / "probe.html";
  std::ofstream(probe) << "<!DOCTYPE html><html><body><p>genesis</p></body></html>\n";
  if (!screenshot(probe, tmp.path() / "probe.png", tmp.path() / "chromium-probe", why))
    return testing::skip_test(testing::Need::chromium, "Chromium cannot start here: " + why);

  const auto a = testing::train_small_run(tmp.path() / "runs", "sft_fp32");
  const auto b = testing::train_small_run(tmp.path() / "runs", "sft_fp16",
                                          {"training.mixed_precision=\"fp16\"", "seed=7"});
  const fs::path html = tmp.path() / "report.html", png = tmp.path() / "report.png";
  const auto r = testing::run_genesis({"report", a.string(), b.string(), "-o", html.string()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);

  const bool rendered = screenshot(html, png, tmp.path() / "chromium-profile", why);
  INFO(why);
  REQUIRE(rendered);
  const std::string script = std::string(GENESIS_TEST_SOURCE_DIR) + "/tests/report/png_colors.py";
  const std::string blue = report::series_color(0), red = report::series_color(1);
  const auto decoded = run_process({"/usr/bin/python3", script, png.string(), blue, red});
  INFO(decoded.err);
  REQUIRE(decoded.exit_code == 0);
  const auto image = nlohmann::json::parse(decoded.out);
  INFO(image.dump());
  CHECK(image["width"] == 1200);
  CHECK(image["height"] == 2000);
  CHECK(image["non_background"].get<double>() > 0.05);  // not a blank page
  CHECK(image["distinct_colors"].get<int>() > 50);      // text, lines and antialiasing
  // A legend line is 20 pixels wide and a swatch 12: only curves across the plots (two columns
  // of charts, about 470 pixels each) cover hundreds of columns.
  for (const std::string& color : {blue, red}) {
    INFO("colour " << color);
    CHECK(image["colors"][color]["columns"].get<int>() > 400);
    CHECK(image["colors"][color]["pixels"].get<int>() > 1000);
  }
}

}  // namespace genesis
