// The doctor's device-file check: are /dev/nvidia* there and usable, and if not, is this a
// container started without GPU access, a machine whose driver did not create them, or a machine
// with no NVIDIA GPU at all? Reads only the file system; needs no driver and no CUDA.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "gpufeed/doctor/report.hpp"

namespace gpufeed::detail::doctor {

// First line of a small text file, or "" if it cannot be read.
inline std::string first_line(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

inline bool exists_noexcept(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::exists(p, ec);
}

// "580.159.04" from /proc/driver/nvidia/version's first line ("NVRM version: NVIDIA UNIX x86_64
// Kernel Module  580.159.04  ..."; the open module words it differently): the first token that
// starts with a digit and contains a dot. "" when the file is absent (module not loaded).
inline std::string kernel_module_version(const std::filesystem::path& proc_dir) {
  const std::string line = first_line(proc_dir / "driver/nvidia/version");
  std::size_t i = line.find(':');
  if (i == std::string::npos) return {};
  while (i < line.size()) {
    const std::size_t start = line.find_first_not_of(' ', i + 1);
    if (start == std::string::npos) break;
    std::size_t end = line.find(' ', start);
    if (end == std::string::npos) end = line.size();
    const std::string tok = line.substr(start, end - start);
    if (!tok.empty() && tok[0] >= '0' && tok[0] <= '9' && tok.find('.') != std::string::npos)
      return tok;
    i = end;
  }
  return {};
}

// Which container runtime this process seems to run under, with the evidence, or "" when none
// is detected. Markers are looked up under root (normally "/"); the process environment is
// consulted only when root is "/" (it describes this process, not a tree under test).
inline std::string detect_container(const std::filesystem::path& root,
                                    const std::filesystem::path& proc_dir) {
  if (exists_noexcept(root / ".dockerenv")) return "Docker (/.dockerenv exists)";
  if (exists_noexcept(root / "run/.containerenv")) return "Podman (/run/.containerenv exists)";
  if (root == "/") {
    if (std::getenv("KUBERNETES_SERVICE_HOST")) return "a Kubernetes pod (KUBERNETES_SERVICE_HOST is set)";
    if (const char* c = std::getenv("container"); c && *c)
      return std::string("a container ($container=") + c + ")";
  }
  std::ifstream cg(proc_dir / "1/cgroup");
  std::string line;
  while (std::getline(cg, line))
    for (const char* word : {"docker", "kubepods", "containerd", "libpod", "crio", "lxc"})
      if (line.find(word) != std::string::npos)
        return std::string("a container (") + word + " in /proc/1/cgroup)";
  return {};
}

// Checks dev_dir for nvidiactl, nvidia-uvm and nvidia<N>. root and proc_dir are "/" and "/proc"
// except in tests, which point them at prepared trees.
inline doctor_check device_files_check(const std::filesystem::path& dev_dir,
                                       const std::filesystem::path& root,
                                       const std::filesystem::path& proc_dir) {
  namespace fs = std::filesystem;
  doctor_check c("device_files", "NVIDIA device files");
  std::vector<int> gpus;
  std::error_code ec;
  for (fs::directory_iterator it(dev_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > 6 && name.starts_with("nvidia") &&
        std::all_of(name.begin() + 6, name.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) &&
        name.size() < 12)
      gpus.push_back(std::stoi(name.substr(6)));
  }
  std::sort(gpus.begin(), gpus.end());
  const fs::path ctl = dev_dir / "nvidiactl", uvm = dev_dir / "nvidia-uvm";
  const bool has_ctl = exists_noexcept(ctl), has_uvm = exists_noexcept(uvm);

  std::vector<std::string> unusable;
  auto note = [&](const fs::path& p) {
    if (::access(p.c_str(), R_OK | W_OK) != 0) unusable.push_back(p.string());
  };
  if (has_ctl) note(ctl);
  if (has_uvm) note(uvm);
  std::string gpu_list;
  for (int g : gpus) {
    const fs::path p = dev_dir / ("nvidia" + std::to_string(g));
    note(p);
    gpu_list += (gpu_list.empty() ? "" : ", ") + p.string();
  }

  const std::string module = kernel_module_version(proc_dir);
  const std::string container = detect_container(root, proc_dir);
  c.fact("GPU device files", gpu_list.empty() ? "none" : gpu_list);
  c.fact(ctl.string(), has_ctl ? "present" : "missing");
  c.fact(uvm.string(), has_uvm ? "present" : "missing");
  c.fact("NVIDIA kernel module", module.empty() ? "not loaded" : module);
  c.fact("container", container.empty() ? "none detected" : container);
  if (root == "/")
    if (const char* v = std::getenv("NVIDIA_VISIBLE_DEVICES"))
      c.fact("NVIDIA_VISIBLE_DEVICES", *v ? v : "(empty)");
  c.number("gpu_device_files", static_cast<double>(gpus.size()));

  if (gpus.empty() && !has_ctl) {
    c.status = check_status::warn;
    if (!container.empty()) {
      c.summary = "no NVIDIA device files in " + dev_dir.string() + ": this looks like " +
                  container + " started without GPU access";
      c.hint = "start the container with GPU access: `docker run --gpus all ...` (NVIDIA Container "
               "Toolkit), `podman run --device nvidia.com/gpu=all ...`, or on Kubernetes request "
               "nvidia.com/gpu in the pod's resources";
    } else if (!module.empty()) {
      c.summary = "the NVIDIA kernel module " + module + " is loaded but " + dev_dir.string() +
                  " has no nvidia device files";
      c.hint = "create them as root: run `nvidia-smi` once, or `nvidia-modprobe -c 0 -u`";
    } else {
      c.summary = "no NVIDIA device files and no NVIDIA kernel module: this machine has no "
                  "NVIDIA GPU, or its driver is not installed";
      c.hint = "on a GPU machine, install the NVIDIA driver; it loads the kernel module and "
               "creates " + dev_dir.string() + "/nvidia*";
    }
    return c;
  }
  c.status = check_status::pass;
  c.summary = std::to_string(gpus.size()) + (gpus.size() == 1 ? " GPU device file" : " GPU device files");
  c.summary += has_ctl && has_uvm ? ", nvidiactl and nvidia-uvm are present" : " present";
  if (gpus.empty() || !has_ctl) {
    c.status = check_status::fail;
    c.summary = gpus.empty() ? dev_dir.string() + "/nvidiactl exists but no " + dev_dir.string() +
                                   "/nvidia<N> GPU device file does"
                             : ctl.string() + " is missing: the driver cannot be reached";
    c.hint = container.empty()
                 ? "reload the driver (`nvidia-smi` as root recreates the files)"
                 : "this container was given only some of the GPU device files; start it with "
                   "`--gpus all` (or the --device list your runtime needs)";
  } else if (!has_uvm) {
    c.status = check_status::fail;
    c.summary = uvm.string() + " is missing: CUDA cannot start without the nvidia-uvm module";
    c.hint = container.empty() ? "load it as root: `nvidia-modprobe -u -c 0` (or `modprobe nvidia-uvm`)"
                               : "start the container with GPU access (`--gpus all`), or add "
                                 "`--device " + uvm.string() + "`";
  }
  if (!unusable.empty()) {
    std::string list;
    for (const auto& u : unusable) list += (list.empty() ? "" : ", ") + u;
    c.status = check_status::fail;
    c.fact("not readable and writable by this user", list);
    c.summary += "; this user cannot open " + list;
    c.hint = "add the user to the group that owns them (`ls -l " + dev_dir.string() +
             "/nvidia*`, often 'video' or 'render') and log in again";
  }
  return c;
}

}  // namespace gpufeed::detail::doctor
