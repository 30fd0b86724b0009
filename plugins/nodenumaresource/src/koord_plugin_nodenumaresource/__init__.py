"""Koordinator's NodeNUMAResource for koord: CPU pinning and NUMA-aware placement."""
