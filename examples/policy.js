// Rules per user, per API and per (user, api), replaced at run time.
import { perMinute, perSecond, PolicyLimiter } from 'sluice';

const policy = new PolicyLimiter({
  maxKeys: 100_000,
  rules: [
    { limit: perSecond(2) }, // the default
    { user: 'acme', limit: perSecond(20) }, // a paying customer
    { api: 'search', limit: [perSecond(5), perMinute(100)] }, // an expensive API
    { user: 'acme', api: 'search', algorithm: 'sliding-log', limit: perSecond(10) },
  ],
});
console.log(policy.tryAcquire({ user: 'bob', api: 'search' }).remaining); // 4: the api rule
console.log(policy.tryAcquire({ user: 'acme', api: 'upload' }).remaining); // 19: the user rule

// From any thread: every thread uses the new rules on its next request.
policy.setRules([{ limit: perSecond(2) }, { user: 'bob', limit: perSecond(50) }]);
console.log(policy.tryAcquire({ user: 'bob', api: 'upload' }).remaining); // 49: upgraded at once
