/*
 * The named values of the domain (task phases and statuses, memory kinds, automation
 * triggers, health report states) as the doors use them in their schemas. They are defined
 * once, beside the stored shapes (db/models.ts); the doors read them here, not from the
 * database layer.
 */
export {
  AUTOMATION_TRIGGERS,
  HEALTH_REPORT_STATUSES,
  MEMORY_KINDS,
  TASK_PHASES,
  TASK_STATUSES,
} from "../db/models.js";
