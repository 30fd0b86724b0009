"""What koord-manager's device-resource calculators share (ADR 0005): reading the node's Device object
(``device``) and the calculator's skeleton around it (``calculator``)."""

from koord_lib_deviceresource.calculator import DEVICE_KIND, DeviceResourceCalculator
from koord_lib_deviceresource.device import DeviceError, add_quantity, healthy_devices, sum_resources

__all__ = [
    "DEVICE_KIND",
    "DeviceError",
    "DeviceResourceCalculator",
    "add_quantity",
    "healthy_devices",
    "sum_resources",
]
