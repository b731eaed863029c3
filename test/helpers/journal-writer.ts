import { z } from "zod";
import { IntakeJournal } from "../../src/queue/intake-journal.js";
import { createLogger } from "../../src/util/logger.js";

/*
 * A process that journals requests whose inserts never finish (a database that stopped
 * answering) and says so on stdout: the intake journal tests kill it there, as a crash would.
 *   node --import tsx test/helpers/journal-writer.ts <DATA_DIR> <count>
 */
export const WRITER_KIND = { name: "test.journaled", schema: z.object({ n: z.number().int() }) };

const [dataDir, count] = process.argv.slice(2);
if (dataDir && count) {
  const journal = await IntakeJournal.open({
    dataDir,
    kinds: [WRITER_KIND],
    enqueue: () => new Promise<boolean>(() => {}),
    logger: createLogger({ level: "silent" }),
  });
  for (let n = 0; n < Number(count); n += 1)
    await journal.enqueue(WRITER_KIND, { n }, { unique: { "data.n": n } });
  process.stdout.write("journaled\n");
  setInterval(() => {}, 60_000);
}
