/**
 * A failure reported on purpose, with the sentence the user should read on the task. It lives
 * below the pipeline so that what the pipeline uses (verify/, the repository's check config)
 * can raise it without importing the pipeline; pipeline/errors.ts turns it into the task's
 * `error`.
 */
export class StageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StageError";
  }
}
