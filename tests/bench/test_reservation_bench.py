"""The Reservation benchmark driver on a small cluster: both runs complete and the checks hold (owners land
only in their own service's reservations, no node is overcommitted counting reservations). No timing is
asserted."""

from __future__ import annotations

from bench.reservation import RESERVATION, compare


def test_reservation_benchmark_runs_side_by_side_and_its_checks_hold() -> None:
    report = compare(nodes=30, pods=120)
    with_r, without = report["withReservations"], report["withoutReservations"]
    assert with_r["scheduled"] == with_r["measuredPods"] == 120
    assert without["scheduled"] == 120
    checks = with_r["checks"]["reservations"]
    assert checks["ok"], checks
    assert checks["ownersInReservations"] > 0
    assert report["ratio"] > 0
    assert RESERVATION.min_pods_per_second == 500
