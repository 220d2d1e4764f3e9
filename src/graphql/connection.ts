import { Field, ObjectType, type ClassType } from 'type-graphql';
import { DomainError } from '../shared/errors.js';

/** Most rows one page of a connection may hold. */
export const MAX_PAGE_SIZE = 100;

/** `first` of a connection: 1 to 100. */
export function checkFirst(first: number): number {
  if (!Number.isInteger(first) || first < 1 || first > MAX_PAGE_SIZE)
    throw new DomainError('invalid_request', `first must be between 1 and ${MAX_PAGE_SIZE}`, 'first');
  return first;
}

@ObjectType({ description: 'Relay-style page information of a connection.' })
export class PageInfo {
  @Field() hasNextPage!: boolean;
  @Field(() => String, { nullable: true, description: 'Pass as `after` to get the next page.' })
  endCursor!: string | null;
}

export const pageInfo = (rows: { cursor: string }[], hasNextPage: boolean): PageInfo =>
  Object.assign(new PageInfo(), {
    hasNextPage,
    endCursor: rows.length ? rows[rows.length - 1].cursor : null,
  });

/** A page as the services return it: rows carrying their opaque cursor, and whether more follow. */
export interface RowPage<R extends { cursor: string }> {
  rows: R[];
  hasNextPage: boolean;
}

/**
 * The one shape of every cursor-paginated list (Relay connection): `{ edges { cursor node } pageInfo }`,
 * as GraphQL types named `names.connection` and `names.edge`. `of(page, toNode)` builds one from a
 * service's page.
 */
export function Connection<TNode extends object>(
  nodeType: ClassType<TNode>,
  names: { connection: string; edge: string; description?: string },
) {
  @ObjectType(names.edge)
  class Edge {
    @Field() cursor!: string;
    @Field(() => nodeType) node!: TNode;
  }

  @ObjectType(names.connection, names.description ? { description: names.description } : {})
  class Page {
    @Field(() => [Edge]) edges!: Edge[];
    @Field(() => PageInfo) pageInfo!: PageInfo;

    static of<R extends { cursor: string }>(page: RowPage<R>, toNode: (row: R) => TNode): Page {
      return Object.assign(new Page(), {
        edges: page.rows.map((r) => Object.assign(new Edge(), { cursor: r.cursor, node: toNode(r) })),
        pageInfo: pageInfo(page.rows, page.hasNextPage),
      });
    }
  }
  return Page;
}
