// The GPU doctor's link checks: the PCIe link (idle and under a copy, against its maximum), the
// clock throttle reasons, and the host-to-device copy rates judged against the link.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "gpufeed/cuda/doctor/detail/checks.hpp"
#include "gpufeed/cuda/doctor/detail/probe.hpp"
#include "gpufeed/doctor/detail/format.hpp"
#include "gpufeed/doctor/detail/nvml.hpp"
#include "gpufeed/doctor/doctor.hpp"

namespace gpufeed::cuda::detail {

// "gpu0_" for a CUDA device, "nvml0_" for a GPU only NVML sees: the probe's number-key prefix.
inline std::string key_prefix(const gpu_probe& p) {
  return p.cuda_id >= 0 ? "gpu" + std::to_string(p.cuda_id) + "_" : "nvml" + std::to_string(p.nvml_index) + "_";
}

inline std::string link_text(std::optional<unsigned> gen, std::optional<unsigned> width) {
  return "Gen" + (gen ? std::to_string(*gen) : std::string("?")) + " x" +
         (width ? std::to_string(*width) : std::string("?"));
}

struct link_ref {
  unsigned generation = 0, width = 0;
  bool maximum = false;  // the link's maximum (else: as read under a copy)
};

// The link a copy rate is judged against: its maximum, so a link that trained below it shows as a
// low percentage (and the pcie check says why); the reading under a copy when NVML gives no
// maximum.
inline std::optional<link_ref> reference_link(const gpu_probe& p) {
  if (p.max_generation && p.max_width) return link_ref{*p.max_generation, *p.max_width, true};
  if (p.busy_confirmed && p.busy.generation && p.busy.width)
    return link_ref{*p.busy.generation, *p.busy.width, false};
  return std::nullopt;
}

inline double best_pinned_gbps(const gpu_probe& p) {
  double best = 0.0;
  for (const auto& r : p.h2d) best = std::max(best, r.pinned_gbps);
  return best;
}

inline doctor_check pcie_check(const dd::nvml_api& nvml, const std::vector<gpu_probe>& probes) {
  doctor_check c = make_check("gpu.pcie");
  if (const std::string why = nvml_unavailable(nvml); !why.empty()) {
    c.summary = why;
    return c;
  }
  if (probes.empty()) {
    c.summary = "no GPU to examine";
    return c;
  }
  std::vector<std::string> words;
  bool any_reported = false;
  for (const auto& p : probes) {
    if (!p.nvml || (!p.idle.generation && !p.max_generation)) {
      c.fact(p.label, "NVML does not report this GPU's PCIe link");
      continue;
    }
    any_reported = true;
    const std::string k = key_prefix(p);
    std::string f;
    if (p.busy_confirmed && p.busy.generation) {
      f = link_text(p.busy.generation, p.busy.width) + " under a copy, ";
      c.number(k + "pcie_generation_under_copy", *p.busy.generation);
      if (p.busy.width) c.number(k + "pcie_width_under_copy", *p.busy.width);
    }
    f += link_text(p.idle.generation, p.idle.width) + " at idle; maximum " +
         link_text(p.max_generation, p.max_width);
    if (p.gpu_max_generation) f += "; the GPU itself supports Gen" + std::to_string(*p.gpu_max_generation);
    c.fact(p.label, f);
    if (p.idle.generation) c.number(k + "pcie_generation_idle", *p.idle.generation);
    if (p.max_generation) c.number(k + "pcie_max_generation", *p.max_generation);
    if (p.max_width) c.number(k + "pcie_max_width", *p.max_width);

    if (p.max_generation && p.gpu_max_generation && *p.max_generation < *p.gpu_max_generation) {
      c.at_least(check_status::warn);
      words.push_back(p.label + " supports Gen" + std::to_string(*p.gpu_max_generation) +
                      " but its link allows only Gen" + std::to_string(*p.max_generation) +
                      ": the slot, riser or host limits it");
    }
    const bool below_max = p.busy_confirmed && p.busy.generation && p.busy.width && p.max_generation &&
                           p.max_width && (*p.busy.generation < *p.max_generation || *p.busy.width < *p.max_width);
    // A copy faster than the link NVML reported can carry means the reading lagged the link's
    // return from its idle state; the copy rate is the better witness.
    const bool reading_lagged =
        below_max && best_pinned_gbps(p) > 1.02 * dd::pcie_link_gbps(*p.busy.generation, *p.busy.width);
    if (reading_lagged) {
      words.push_back(p.label + ": maximum " + link_text(p.max_generation, p.max_width) + " (NVML read " +
                      link_text(p.busy.generation, p.busy.width) + " during a copy, but the copy ran "
                      "faster than such a link allows: the reading lagged)");
    } else if (below_max) {
      c.at_least(check_status::warn);
      words.push_back(p.label + " runs at " + link_text(p.busy.generation, p.busy.width) +
                      " under a copy, below its maximum " + link_text(p.max_generation, p.max_width));
    } else if (p.busy_confirmed && p.busy.generation) {
      words.push_back(p.label + ": " + link_text(p.busy.generation, p.busy.width) + " under a copy, " +
                      (p.max_generation && p.max_width ? "the link's maximum" : "maximum not reported"));
    } else {
      std::string w = p.label + ": maximum " + link_text(p.max_generation, p.max_width) + ", " +
                      link_text(p.idle.generation, p.idle.width) + " at idle";
      if (p.idle.generation && p.max_generation && *p.idle.generation < *p.max_generation)
        w += " (a lower generation at idle is normal: the GPU slows its link to save power and "
             "raises it when copies start)";
      words.push_back(w);
    }
  }
  if (!any_reported) {
    c.summary = "NVML does not report the PCIe link of any GPU here (common in virtual machines)";
    return c;
  }
  c.at_least(check_status::pass);
  for (const auto& w : words) c.summary += (c.summary.empty() ? "" : "; ") + w;
  if (c.status == check_status::warn)
    c.hint = "reseat the GPU or move it to a full-speed x16 slot, check risers and the BIOS PCIe "
             "settings: a slower or narrower link caps every copy";
  return c;
}

inline doctor_check throttle_check(const dd::nvml_api& nvml, const std::vector<gpu_probe>& probes) {
  doctor_check c = make_check("gpu.throttle");
  if (const std::string why = nvml_unavailable(nvml); !why.empty()) {
    c.summary = why;
    return c;
  }
  std::vector<std::string> held;
  bool any = false;
  for (const auto& p : probes) {
    const bool busy = p.busy_confirmed && p.busy.clock_reasons;
    const auto mask = busy ? p.busy.clock_reasons : p.idle.clock_reasons;
    if (!mask) {
      c.fact(p.label, "NVML does not report clock throttle reasons");
      continue;
    }
    any = true;
    const auto d = dd::decode_clock_reasons(*mask);
    std::string list;
    for (const auto& w : d.words) list += (list.empty() ? "" : "; ") + w;
    const char* when = busy ? "under a copy" : "at idle";
    c.fact(p.label + (busy ? " under a copy" : " at idle"), list.empty() ? "none: clocks as high as allowed" : list);
    c.number(key_prefix(p) + "clock_reasons", static_cast<double>(*mask));
    if (d.slows_work) {
      c.at_least(check_status::warn);
      held.push_back(p.label + " " + when + ": " + list);
    }
  }
  if (!any) {
    c.summary = probes.empty() ? "no GPU to examine" : "NVML does not report clock throttle reasons here";
    return c;
  }
  c.at_least(check_status::pass);
  if (held.empty()) {
    c.summary = "no GPU's clocks are held back by power or heat";
  } else {
    c.summary = "clocks held back: ";
    for (std::size_t i = 0; i < held.size(); ++i) c.summary += (i ? "; " : "") + held[i];
    c.hint = "check cooling, power limits and the power supply "
             "(`nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE`)";
  }
  return c;
}

// One GPU's copy-rate verdict, e.g. "pinned copies reach 52.9 GB/s, 84% of what a PCIe Gen5 x16
// link carries (63.0 GB/s); pageable copies reach only 7.10 GB/s: use pinned memory".
struct h2d_verdict {
  std::string words;
  check_status status = check_status::pass;
  double pinned_best = 0.0;
};

inline h2d_verdict judge_h2d(const gpu_probe& p) {
  h2d_verdict v;
  double pageable_best = 0.0;
  for (const auto& r : p.h2d) pageable_best = std::max(pageable_best, r.pageable_gbps);
  v.pinned_best = best_pinned_gbps(p);
  v.words = "pinned copies reach " + dd::gbps(v.pinned_best);
  if (const auto link = reference_link(p); link && dd::pcie_link_gbps(link->generation, link->width) > 0) {
    const double cap = dd::pcie_link_gbps(link->generation, link->width);
    const double pct = 100.0 * v.pinned_best / cap;
    v.words += ", " + dd::fixed(pct, 0) + "% of what a " + dd::pcie_link_name(link->generation, link->width) +
               " link carries (" + dd::gbps(cap) + (link->maximum ? ", this GPU's maximum" : ", as read during a copy") + ")";
    // ~85% of the raw rate is the practical ceiling (packet overheads); 70% leaves room for
    // virtualisation and IOMMU costs before calling it a problem.
    if (pct < 70.0) v.status = check_status::warn;
  } else {
    v.words += " (the link's speed is unknown without NVML)";
  }
  if (pageable_best < v.pinned_best) {
    v.words += "; pageable copies reach only " + dd::gbps(pageable_best) + ": use pinned memory (gpufeed does)";
  } else {
    v.status = check_status::warn;
    v.words += "; pageable copies reach " + dd::gbps(pageable_best) +
               ", as fast as pinned: something else limits the copies";
  }
  return v;
}

inline doctor_check h2d_check(const device_query& q, const std::vector<gpu_probe>& probes, bool measured) {
  doctor_check c = make_check("gpu.h2d");
  if (!q.available) {
    c.summary = "no GPU visible to CUDA: copy rates not measured";
    return c;
  }
  if (!measured) {
    c.summary = "copy rates not measured (turned off)";
    return c;
  }
  const h2d_verdict* slowest = nullptr;
  std::vector<h2d_verdict> verdicts;
  verdicts.reserve(probes.size());
  for (const auto& p : probes) {
    if (!p.error.empty() || !p.h2d_error.empty()) {
      c.status = check_status::fail;
      c.fact(p.label, "could not measure: " + (p.error.empty() ? p.h2d_error : p.error));
      continue;
    }
    const std::string k = key_prefix(p);
    for (const auto& r : p.h2d) {
      c.fact(p.label + ", " + dd::bytes(r.bytes) + " copies",
             "pinned " + dd::gbps(r.pinned_gbps) + ", pageable " + dd::gbps(r.pageable_gbps));
      c.number(k + "pinned_gbps_" + std::to_string(r.bytes), r.pinned_gbps);
      c.number(k + "pageable_gbps_" + std::to_string(r.bytes), r.pageable_gbps);
    }
    verdicts.push_back(judge_h2d(p));
    c.number(k + "pinned_gbps_best", verdicts.back().pinned_best);
    c.at_least(verdicts.back().status);
    if (!slowest || verdicts.back().pinned_best < slowest->pinned_best) slowest = &verdicts.back();
    if (!p.h2d.empty() && p.h2d.front().bytes <= (std::size_t{1} << 20) &&
        p.h2d.front().pinned_gbps < 0.5 * verdicts.back().pinned_best)
      c.fact(p.label + ", small copies",
             dd::bytes(p.h2d.front().bytes) + " copies reach only " + dd::gbps(p.h2d.front().pinned_gbps) +
                 " pinned: copy whole batches, not single records (gpufeed does)");
  }
  c.at_least(check_status::pass);
  if (!slowest) {
    c.summary = "copy rates could not be measured (see facts)";
    return c;
  }
  c.summary = (verdicts.size() > 1 ? "slowest of " + std::to_string(verdicts.size()) + " GPUs: " : std::string()) +
              slowest->words;
  if (slowest->status == check_status::warn)
    c.hint = "another process may be copying at the same time, or an IOMMU or virtualisation layer "
             "limits the link; see the PCIe check";
  return c;
}

}  // namespace gpufeed::cuda::detail
