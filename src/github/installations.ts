import {
  addInstallationRepos,
  installationInfo,
  markInstallationDeleted,
  recordInstallation,
  removeInstallationRepos,
  setInstallationSuspended,
} from "../domain/workspaces/linking.js";
import type { HandlerGroup } from "./deps.js";
import { claimDelivery } from "./delivery.js";

/*
 * installation.* and installation_repositories.*: keep the installation's workspace row in
 * step with GitHub. Each handler is one or two writes (no GitHub calls), so it finishes
 * inside the webhook request, after claiming the delivery id so that a redelivery (possibly
 * stale by then) is not applied again. Nothing here links an installation to an account: that is
 * the setup flow's job (domain/workspaces/linking.ts), after GitHub vouched for the user.
 */
export const installationHandlers: HandlerGroup = (probot, deps) => {
  const { models, logger } = deps;
  const webUrl = deps.github.webUrl;
  const log = (deliveryId: string, installationId: number) =>
    logger.child({ component: "github", deliveryId, installationId });

  probot.on(["installation.created", "installation.new_permissions_accepted"], async (context) => {
    if (!(await claimDelivery(models, context.id))) return;
    const { installation, repositories } = context.payload;
    const info = installationInfo(installation);
    // `created` lists every repository the installation can access; the other action may
    // carry the list too, and it is the current one either way.
    const ws = await recordInstallation(models, webUrl, info, repositories ?? undefined);
    log(context.id, installation.id).info(
      { action: context.payload.action, repos: ws.repos.length, linked: ws.account_id !== null },
      "installation recorded",
    );
  });

  probot.on("installation.deleted", async (context) => {
    if (!(await claimDelivery(models, context.id))) return;
    await markInstallationDeleted(models, context.payload.installation.id);
    log(context.id, context.payload.installation.id).info("installation deleted");
  });

  probot.on("installation.suspend", async (context) => {
    if (!(await claimDelivery(models, context.id))) return;
    const { installation } = context.payload;
    const info = installationInfo(installation);
    await setInstallationSuspended(models, webUrl, info, info.suspended_at ?? new Date());
    log(context.id, installation.id).info("installation suspended");
  });

  probot.on("installation.unsuspend", async (context) => {
    if (!(await claimDelivery(models, context.id))) return;
    const { installation } = context.payload;
    await setInstallationSuspended(models, webUrl, installationInfo(installation), null);
    log(context.id, installation.id).info("installation unsuspended");
  });

  probot.on("installation_repositories.added", async (context) => {
    if (!(await claimDelivery(models, context.id))) return;
    const { installation, repositories_added } = context.payload;
    const ws = await addInstallationRepos(
      models,
      webUrl,
      installationInfo(installation),
      repositories_added.map((r) => ({ ...r, private: r.private ?? false })),
    );
    log(context.id, installation.id).info(
      { added: repositories_added.length, repos: ws?.repos.length },
      "installation repositories added",
    );
  });

  probot.on("installation_repositories.removed", async (context) => {
    if (!(await claimDelivery(models, context.id))) return;
    const { installation, repositories_removed } = context.payload;
    const ws = await removeInstallationRepos(
      models,
      webUrl,
      installationInfo(installation),
      repositories_removed.map((r) => r.id),
    );
    log(context.id, installation.id).info(
      { removed: repositories_removed.length, repos: ws?.repos.length },
      "installation repositories removed",
    );
  });
};
