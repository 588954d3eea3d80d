/** The ids of every page of an `engine.admin` query, following its cursors: what the admin tests of both backends read. */
import type { EvaluationPage, EvaluationQuery } from '../../src/broker/admin-types.js';

export async function idsByPage(admin: { evaluations(query: EvaluationQuery): Promise<EvaluationPage> }, query: EvaluationQuery): Promise<string[][]> {
  const pages: string[][] = [];
  let cursor: string | undefined;
  do {
    const page = await admin.evaluations({ ...query, ...(cursor === undefined ? {} : { cursor }) });
    pages.push(page.items.map((e) => e.id));
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return pages;
}
