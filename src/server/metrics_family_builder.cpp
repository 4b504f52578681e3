// FamilyBuilder and the small helpers every metric group shares (metrics_families.h).
#include "server/metrics_families.h"

namespace raftlog::server::metrics {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

Histogram::BucketBoundaries exponential(double start, double factor, int count) {
  Histogram::BucketBoundaries bounds;
  double bound = start;
  for (int i = 0; i < count; ++i, bound *= factor) bounds.push_back(bound);
  return bounds;
}

void follow_total(Counter& counter, double total) {
  if (total > counter.Value()) counter.Increment(total - counter.Value());
}

FamilyBuilder::FamilyBuilder(prometheus::Registry& registry, std::uint64_t node_id)
    : registry_(registry), node_{{"node_id", std::to_string(node_id)}} {}

prometheus::Family<Gauge>& FamilyBuilder::gauges(const char* name, const char* help) {
  return BuildGauge().Name(name).Help(help).Labels(node_).Register(registry_);
}

prometheus::Family<Counter>& FamilyBuilder::counters(const char* name, const char* help) {
  return BuildCounter().Name(name).Help(help).Labels(node_).Register(registry_);
}

prometheus::Family<Histogram>& FamilyBuilder::histograms(const char* name, const char* help) {
  return BuildHistogram().Name(name).Help(help).Labels(node_).Register(registry_);
}

}  // namespace raftlog::server::metrics
