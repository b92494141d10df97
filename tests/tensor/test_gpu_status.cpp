// "No GPU" and "a GPU genesis cannot use" are told apart: the classification of the runtime's
// answers (every build), and, in a CUDA build, the whole binary shown a present-but-unusable GPU
// through a fake driver library (an old driver, an OS error): doctor FAILs naming the cause,
// training refuses instead of moving to the CPU, and training.device = "cpu" still trains.
#include <catch2/catch.hpp>

#include "genesis/core/error.hpp"
#include "support/cli_run.hpp"
#include "tensor/gpu_status.hpp"

using namespace genesis;
using Answer = GpuProbe::Answer;

namespace {

GpuProbe probe(Answer answer, int driver = 13000) {
  GpuProbe p;
  p.answer = answer;
  p.driver_version = driver;
  p.runtime_version = 13000;
  return p;
}

}  // namespace

TEST_CASE("a machine without a GPU or driver is none, with the runtime's reason", "[tensor]") {
  GpuProbe no_driver = probe(Answer::insufficient_driver, 0);
  GpuStatus s = classify_gpu_probe(no_driver);
  CHECK(s.state == GpuState::none);
  CHECK(s.count == 0);
  CHECK_THAT(s.reason, Catch::Contains("no NVIDIA driver") && Catch::Contains("13.0"));

  GpuProbe hidden = probe(Answer::no_device);
  hidden.visible_devices = "";
  s = classify_gpu_probe(hidden);
  CHECK(s.state == GpuState::none);
  CHECK_THAT(s.reason, Catch::Contains("no CUDA-capable device") &&
                           Catch::Contains("CUDA_VISIBLE_DEVICES="));

  GpuProbe zero = probe(Answer::devices);
  CHECK(classify_gpu_probe(zero).state == GpuState::none);
}

TEST_CASE("devices the runtime counts are usable", "[tensor]") {
  GpuProbe two = probe(Answer::devices);
  two.count = 2;
  two.device_nodes = {"/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1"};
  const GpuStatus s = classify_gpu_probe(two);
  CHECK(s.state == GpuState::usable);
  CHECK(s.count == 2);
  CHECK(s.reason.empty());
}

TEST_CASE("a GPU that is there but unusable is broken, with the fix", "[tensor]") {
  GpuProbe old_driver = probe(Answer::insufficient_driver, 11040);
  GpuStatus s = classify_gpu_probe(old_driver);
  CHECK(s.state == GpuState::broken);
  CHECK(s.count == 0);
  CHECK_THAT(s.reason, Catch::Contains("supports CUDA 11.4") &&
                           Catch::Contains("older than the CUDA 13.0 runtime") &&
                           Catch::Contains("update the driver"));

  GpuProbe no_permission = probe(Answer::no_device);
  no_permission.device_nodes = {"/dev/nvidiactl", "/dev/nvidia0"};
  no_permission.inaccessible_node = "/dev/nvidia0";
  s = classify_gpu_probe(no_permission);
  CHECK(s.state == GpuState::broken);
  CHECK_THAT(s.reason, Catch::Contains("may not open /dev/nvidia0") &&
                           Catch::Contains("permission denied"));

  GpuProbe nodes_without_library = probe(Answer::insufficient_driver, 0);
  nodes_without_library.device_nodes = {"/dev/nvidia0"};
  s = classify_gpu_probe(nodes_without_library);
  CHECK(s.state == GpuState::broken);
  CHECK_THAT(s.reason, Catch::Contains("libcuda.so.1"));

  GpuProbe os_error = probe(Answer::other_error);
  os_error.error = "OS call failed or operation not supported on this OS (cudaErrorOperatingSystem)";
  s = classify_gpu_probe(os_error);
  CHECK(s.state == GpuState::broken);
  CHECK_THAT(s.reason, Catch::Contains("cudaErrorOperatingSystem") &&
                           Catch::Contains("nvidia-smi"));
}

#ifdef GENESIS_WITH_CUDA

namespace {

// genesis run against the fake driver library, as on a machine whose GPU the runtime can see
// but not use.
testing::CliResult with_fake_driver(std::vector<std::string> args, int driver_version,
                                    int init_result) {
  return testing::run_genesis(
      std::move(args),
      {{{"LD_LIBRARY_PATH", std::string(GENESIS_TEST_FAKE_DRIVER_DIR)},
        {"FAKE_CUDA_DRIVER_VERSION", std::to_string(driver_version)},
        {"FAKE_CUDA_INIT_RESULT", std::to_string(init_result)},
        {"RANK", std::nullopt}, {"WORLD_SIZE", std::nullopt}, {"LOCAL_RANK", std::nullopt},
        {"OMP_NUM_THREADS", "2"}},
       {}});
}

std::vector<std::string> tiny_mlp(const testing::TempDir& dir, const std::string& device) {
  return {"train", "--preset", "mlp", "-o", dir.path().string(), "--set", "training.max_steps=2",
          "--set", "data.num_samples=256", "--set", "training.device=" + device};
}

}  // namespace

TEST_CASE("an old driver: doctor FAILs and training refuses instead of using the CPU",
          "[tensor][cli]") {
  const testing::CliResult doctor = with_fake_driver({"doctor"}, 11040, 0);
  INFO("doctor stdout: " << doctor.out << "\nstderr: " << doctor.err);
  CHECK(doctor.exit_code == 1);
  CHECK_THAT(doctor.out, Catch::Contains("FAIL  cuda") &&
                             Catch::Contains("a GPU is present but unusable") &&
                             Catch::Contains("supports CUDA 11.4"));

  testing::TempDir dir;
  for (const std::string device : {"auto", "cuda"}) {
    const testing::CliResult train = with_fake_driver(tiny_mlp(dir, device), 11040, 0);
    INFO("training.device=" << device << " stderr: " << train.err);
    CHECK(train.exit_code == 1);
    CHECK_THAT(train.err, Catch::Contains("training.device = \"" + device + "\"") &&
                              Catch::Contains("found a GPU it cannot use") &&
                              Catch::Contains("training.device=cpu"));
  }
  const testing::CliResult on_cpu = with_fake_driver(tiny_mlp(dir, "cpu"), 11040, 0);
  INFO("training.device=cpu stderr: " << on_cpu.err);
  CHECK(on_cpu.exit_code == 0);
}

TEST_CASE("a runtime error other than no device is a failure, no device is not",
          "[tensor][cli]") {
  constexpr int kOperatingSystemError = 304, kNoDevice = 100;
  const testing::CliResult broken = with_fake_driver({"doctor"}, 13000, kOperatingSystemError);
  INFO("doctor stdout: " << broken.out);
  CHECK(broken.exit_code == 1);
  CHECK_THAT(broken.out, Catch::Contains("FAIL  cuda") &&
                             Catch::Contains("cudaErrorOperatingSystem"));

  const testing::CliResult absent = with_fake_driver({"doctor"}, 13000, kNoDevice);
  INFO("doctor stdout: " << absent.out);
  CHECK_THAT(absent.out, Catch::Contains("warn  cuda") &&
                             Catch::Contains("no CUDA-capable device is detected"));
  CHECK_FALSE(Catch::Contains("FAIL  cuda").match(absent.out));
  testing::TempDir dir;
  const testing::CliResult train = with_fake_driver(tiny_mlp(dir, "auto"), 13000, kNoDevice);
  INFO("train stderr: " << train.err);
  CHECK(train.exit_code == 0);
}

#endif  // GENESIS_WITH_CUDA
