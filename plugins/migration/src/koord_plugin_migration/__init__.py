"""koord-plugin-migration: Koordinator's MigrationController (PodMigrationJobs) as a descheduler plugin."""

from koord_plugin_migration.args import MigrationControllerArgs
from koord_plugin_migration.plugin import MigrationController
from koord_plugin_migration.util import max_migrating, max_unavailable

__all__ = ["MigrationController", "MigrationControllerArgs", "max_migrating", "max_unavailable"]
