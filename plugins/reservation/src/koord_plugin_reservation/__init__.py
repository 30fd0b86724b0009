"""Koordinator's Reservation scheduler plugin for koord (see ``plugin``)."""

from koord_plugin_reservation.args import ReservationArgs
from koord_plugin_reservation.plugin import Reservation

__all__ = ["Reservation", "ReservationArgs"]
